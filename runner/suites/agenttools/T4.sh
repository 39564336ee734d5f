#!/bin/sh
# T4: git status of a repository of 256 files with 8 changed, 8 new and 4
# removed.
# Base: setup-git.sh's repository. Verifier: the 20 lines git status
# printed, and the repository unchanged.
set -eu
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git -c safe.directory='*' status --porcelain=v1 --untracked-files=all
