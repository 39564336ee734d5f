//go:build unix && !linux

package toolexec

import (
	"context"
	"os/exec"
	"syscall"
)

// guarded starts path in a new process group; without Pdeathsig, only
// ctx kills the group.
func guarded(ctx context.Context, path string, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}
