#!/bin/sh
# C05: the C04 tree, then find over it; find's output goes to stdout.
# Base: empty. Verifier: find printed 1,100 entries.
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
find . -mindepth 1
