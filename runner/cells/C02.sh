#!/bin/sh
# C02: create 1,000 files, then one stat process per file.
# Base: empty. Verifier: 1,000 files.
set -eu
i=1
while [ "$i" -le 1000 ]; do
	echo "file $i" >"f$i"
	i=$((i + 1))
done
i=1
while [ "$i" -le 1000 ]; do
	stat "f$i" >/dev/null
	i=$((i + 1))
done
