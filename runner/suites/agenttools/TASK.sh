#!/bin/sh
# TASK: the tool loop in one window: T1 to T5, one after the other, in one
# Sandbox and one workspace, each in its directory; each one's output
# follows a line "# Tn". (The Sandbox's launch and exit are not in the
# window: the protocol's Sandbox is up before it.)
# Base: base.bin, and setup-task.sh's tree/ and repo/.
# Verifier: each operation's output and result, as T1 to T5's verifiers.
set -eu
here=${0%/*}
echo '# T1'
(cd tree && sh "$here/T1.sh")
echo '# T2'
sh "$here/T2.sh"
echo '# T3'
sh "$here/T3.sh"
echo '# T4'
(cd repo && sh "$here/T4.sh")
echo '# T5'
(cd tree && sh "$here/T5.sh")
