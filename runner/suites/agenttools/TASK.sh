#!/bin/sh
# TASK: the tool loop in one window: T1 to T7, one after the other, in one
# Sandbox and one workspace, each in its directory; each one's output
# follows a line "# Tn". (The Sandbox's launch and exit are not in the
# window: the protocol's Sandbox is up before it; the suite asks for the
# cell to be timed from launch to exit too, which the runner does.)
# Base: base.bin, and setup-task.sh's tree/, repo/, cargo/ and npm/
# Verifier: each operation's output and result, as T1 to T7's verifiers.
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
echo '# T6'
(cd cargo && sh "$here/T6.sh")
echo '# T7'
(cd npm && sh "$here/T7.sh")
