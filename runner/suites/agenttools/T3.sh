#!/bin/sh
# T3: write 256 files of 64 KiB, out/f1..out/f256, with shell builtins
# only (no process per file): each is its number in four digits, then the
# same 65,532 bytes.
# Base: empty. Verifier: 256 files of 65,536 bytes, their contents.
set -eu
s='sealbench agent-tools T3: 256 files of 64 KiB, each of one line'
s="$s
"
i=0
while [ "$i" -lt 10 ]; do
	s=$s$s
	i=$((i + 1))
done
s=${s#????}
mkdir out
i=1
while [ "$i" -le 256 ]; do
	n=$((10000 + i))
	printf '%s%s' "${n#1}" "$s" >"out/f$i"
	i=$((i + 1))
done
