#!/bin/sh
# C09: read the 64 MiB file committed in the base layer; its SHA-256 goes
# to stdout.
# Base: base.bin, 64 MiB of pseudo-random bytes from a fixed seed.
# Verifier: the printed SHA-256 is base.bin's.
set -eu
sha256sum base.bin
