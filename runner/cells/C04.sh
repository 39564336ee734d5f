#!/bin/sh
# C04: 100 directories (one mkdir each), 10 files in each (one touch each).
# Base: empty. Verifier: 100 directories, 1,000 files.
set -eu
d=1
while [ "$d" -le 100 ]; do
	mkdir "d$d"
	f=1
	while [ "$f" -le 10 ]; do
		touch "d$d/f$f"
		f=$((f + 1))
	done
	d=$((d + 1))
done
