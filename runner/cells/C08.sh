#!/bin/sh
# C08: write 64 MiB, then read it back.
# Base: empty. Verifier: out.bin's size and SHA-256.
set -eu
dd if=/dev/zero of=out.bin bs=1M count=64 2>/dev/null
cat out.bin >/dev/null
