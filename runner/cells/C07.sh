#!/bin/sh
# C07: write 64 MiB, then copy it.
# Base: empty. Verifier: out.bin's and copy.bin's size and SHA-256.
set -eu
dd if=/dev/zero of=out.bin bs=1M count=64 2>/dev/null
cp out.bin copy.bin
