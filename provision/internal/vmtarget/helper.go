package vmtarget

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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

// ListenPrivate listens on the unix socket path, replacing a stale socket
// a helper that died left there, readable and writable by this user only.
// The caller closes the listener and removes path.
func ListenPrivate(what, path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, err
	}
	return ln, nil
}
