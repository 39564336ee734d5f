#!/bin/sh
# agent-tools setup of T4 (untimed, in the empty base directory): a git
# repository of 256 files in 8 directories, one commit, then 8 files
# changed, 8 new and 4 removed. Every file's time is fixed, and older
# than the index, so that git status compares sizes and times and never
# has to re-read a "racily clean" file.
set -eu
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z
git init -q -b main .
d=1
while [ "$d" -le 8 ]; do
	mkdir "src$d"
	f=1
	while [ "$f" -le 32 ]; do
		printf 'module %d.%d\nvalue = %d\n' "$d" "$f" $((d * f)) >"src$d/m$f.txt"
		f=$((f + 1))
	done
	d=$((d + 1))
done
touch -d @1767225600 src*/*
git add .
git -c user.name=sealbench -c user.email=sealbench@localhost commit -q -m base
d=1
while [ "$d" -le 8 ]; do
	echo "changed" >>"src$d/m1.txt"
	echo "new $d" >"src$d/new.txt"
	d=$((d + 1))
done
rm src1/m2.txt src3/m2.txt src5/m2.txt src7/m2.txt
touch -d @1767225660 src*/*
