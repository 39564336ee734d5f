package toolexec

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// Command is exec.CommandContext for a child that must not outlive this
// process, nor leave its own children behind: a build's go command and
// the compilers it starts, git, dpkg-deb. The child runs in a process
// group of its own, and the whole group is killed (SIGKILL) when ctx is
// done. On Linux the group also dies with this process, however it ends,
// kill -9 included: the child is started under a small /bin/sh guard
// that leads the group, is told of this process's death by the kernel
// (Pdeathsig), and then kills the group. Elsewhere only ctx kills it.
//
// The command's exit status is the child's; a child killed by signal N
// exits 128+N on Linux (the guard's `wait` says so). Stdin, stdout,
// stderr and the environment are the caller's to set, as with exec.Cmd.
// A name that cannot be found leaves the error in the Cmd's Err, as
// exec.Command does.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path, err := exec.LookPath(name)
	if err != nil {
		return exec.CommandContext(ctx, name, args...) // carries the error in Err
	}
	cmd := guarded(ctx, path, args)
	cmd.Cancel = func() error {
		// The negative pid is the group: the child and all it started.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A grandchild that keeps the output open must not hold Wait for long
	// once the group is gone.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
