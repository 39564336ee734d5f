#!/bin/sh
# C06: write 64 MiB.
# Base: empty. Verifier: out.bin's size and SHA-256.
set -eu
dd if=/dev/zero of=out.bin bs=1M count=64 2>/dev/null
