#!/bin/sh
# agent-tools setup of TASK (untimed, in the base directory, base.bin
# already there): T1 and T5's tree in tree/, T4's repository in repo/.
set -eu
here=${0%/*}
mkdir tree repo
(cd tree && sh "$here/setup-tree.sh")
(cd repo && sh "$here/setup-git.sh")
