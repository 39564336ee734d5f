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
# Backdate the files: git re-reads "racily clean" files, those not older
# than the index by a whole second, and where a second boundary falls
# during the run would otherwise change how many files it opens.
touch -d @1767225600 f*
git add .
git -c user.name=sealbench -c user.email=sealbench@localhost commit -q -m C12
