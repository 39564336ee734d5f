#!/bin/sh
# C03: create 1,000 files, then remove them.
# Base: empty. Verifier: an empty directory.
set -eu
i=1
while [ "$i" -le 1000 ]; do
	echo "file $i" >"f$i"
	i=$((i + 1))
done
rm -f -- f*
