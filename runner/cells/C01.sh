#!/bin/sh
# C01: create 1,000 files with shell redirections (no process per file).
# Base: empty. Verifier: 1,000 files f1..f1000, each holding "file N".
set -eu
i=1
while [ "$i" -le 1000 ]; do
	echo "file $i" >"f$i"
	i=$((i + 1))
done
