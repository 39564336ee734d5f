#!/bin/sh
# T5: rg over 2,048 files in 32 directories for a word 292 of them hold.
# Base: setup-tree.sh's tree. Verifier: the 292 matching lines printed
# (rg's order is its threads', so the verifier sorts them).
set -eu
rg --no-config -n needle .
