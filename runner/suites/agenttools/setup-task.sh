#!/bin/sh
# agent-tools setup of TASK (untimed, in the base directory, base.bin
# already there): T1 and T5's tree in tree/, T4's repository in repo/,
# T6's crate in cargo/, T7's packages in npm/.
set -eu
here=${0%/*}
mkdir tree repo cargo npm
(cd tree && sh "$here/setup-tree.sh")
(cd repo && sh "$here/setup-git.sh")
(cd cargo && sh "$here/setup-cargo.sh")
(cd npm && sh "$here/setup-npm.sh")
