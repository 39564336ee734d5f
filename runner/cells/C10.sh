#!/bin/sh
# C10: copy the 64 MiB base file.
# Base: base.bin, as for C09. Verifier: copy.bin's SHA-256 equals base.bin's.
set -eu
cp base.bin copy.bin
