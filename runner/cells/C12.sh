#!/bin/sh
# C12: git init, 100 files, git add, git commit.
# Base: empty. Verifier: one commit, 100 tracked files.
set -eu
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z
git init -q -b main .
i=1
while [ "$i" -le 100 ]; do
	echo "file $i" >"f$i"
	i=$((i + 1))
done
git add .
git -c user.name=sealbench -c user.email=sealbench@localhost commit -q -m C12
