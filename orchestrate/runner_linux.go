package orchestrate

import "syscall"

// runnerProcAttr starts the runner in its own process group (a terminal's
// Ctrl-C reaches the host, which forwards it once) and kills it if the
// host dies: a runner must never go on creating Sandboxes while
// `sealbench teardown` removes the run's.
func runnerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
