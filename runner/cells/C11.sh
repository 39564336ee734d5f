#!/bin/sh
# C11: overwrite the 64 MiB base file in place.
# Base: base.bin, as for C09. Verifier: base.bin holds the new contents (64 MiB
# of zeros); the base Layer itself is unchanged.
set -eu
dd if=/dev/zero of=base.bin bs=1M count=64 conv=notrunc 2>/dev/null
