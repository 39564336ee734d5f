#!/bin/sh
# M1's setup: ten files in src/.
set -eu
mkdir src
i=1
while [ "$i" -le 10 ]; do
	echo "one $i" >"src/f$i"
	i=$((i + 1))
done
