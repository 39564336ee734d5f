#!/bin/sh
# T2: read 64 MiB and SHA-256 it.
# Base: base.bin, 64 MiB of pseudo-random bytes from a fixed seed.
# Verifier: the printed SHA-256 is base.bin's.
set -eu
sha256sum base.bin
