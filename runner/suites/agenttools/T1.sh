#!/bin/sh
# T1: traverse 2,048 files in 32 directories: find stats every entry and
# prints each file's path and size.
# Base: setup-tree.sh's tree. Verifier: the 2,048 paths and sizes printed.
set -eu
find . -type f -printf '%p %s\n'
