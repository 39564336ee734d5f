package vmtarget

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sealbench/sealbench/internal/toolexec"
)

// HelperCommand is the command line of a target's background helper (the
// microsandbox Engine proxy, the qemu link): cmd when given (tests name a
// binary of their own), else this executable with subcommand. Its binary
// must be an absolute path, so that the ledger records what a teardown
// may kill.
func HelperCommand(target, what string, cmd []string, subcommand string) ([]string, error) {
	if len(cmd) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%s target: finding this executable for the %s: %w", target, what, err)
		}
		cmd = []string{exe, subcommand}
	}
	if !filepath.IsAbs(cmd[0]) {
		return nil, fmt.Errorf("%s target: the %s command %q is not an absolute path", target, what, cmd[0])
	}
	return cmd, nil
}

// StartBackground starts argv in the background in a session of its own
// (it outlives this process, as the target does), in dir, its output
// appended to the file log; the channel closes when it exits (it is
// reaped if it exits while this process runs).
func StartBackground(argv []string, dir, log string) (chan struct{}, error) {
	lf, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", toolexec.Quote(argv), err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	return exited, nil
}

// Running reports whether a background process runs: the one this
// process started (exited not nil) by its channel, since until it has
// exec'd /proc does not show it as itself; another by running.
func Running(exited chan struct{}, running func() bool) bool {
	if exited == nil {
		return running()
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Tail is the last n bytes of the file at p, trimmed, for an error.
func Tail(p string, n int64) string {
	f, err := os.Open(p)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		f.Seek(fi.Size()-n, 0)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return strings.TrimSpace(string(b[:k]))
}
