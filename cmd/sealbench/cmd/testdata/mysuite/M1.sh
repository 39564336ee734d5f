#!/bin/sh
# M1: copy src/ to copy/, then list it.
set -eu
cp -r src copy
ls copy
