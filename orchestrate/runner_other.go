//go:build !linux

package orchestrate

import "syscall"

// runnerProcAttr starts the runner in its own process group (a terminal's
// Ctrl-C reaches the host, which forwards it once). There is no parent
// death signal here: the runner watches its parent itself and stops when
// the host is gone.
func runnerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
