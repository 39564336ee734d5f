package toolexec

import (
	"context"
	"os/exec"
	"syscall"
)

// guardScript leads the child's process group. Its stdin is passed on (an
// asynchronous command's would be /dev/null). SIGTERM, which the kernel
// sends when this process dies, or a HUP or INT, kills the whole group,
// the guard with it; otherwise it waits for the child and exits with its
// status.
const guardScript = `trap 'kill -KILL 0' TERM HUP INT
exec 3<&0
"$@" <&3 3<&- &
wait $!`

// guarded starts path under the guard, in a new process group, with
// SIGTERM as its parent-death signal. Pdeathsig follows the thread that
// started the child, and Go's runtime ends a thread only when a goroutine
// locked to it exits: the commands started here run from goroutines that
// lock no thread.
func guarded(ctx context.Context, path string, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", guardScript, "sealbench-guard", path}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	return cmd
}
