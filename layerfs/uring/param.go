//go:build linux

package uring

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ParamPath is the fuse module's switch for FUSE over io_uring. It is
// kernel-wide and off by default; the kernel offers FUSE_OVER_IO_URING in
// INIT only while it is on.
const ParamPath = "/sys/module/fuse/parameters/enable_uring"

// ErrNotNegotiated is wrapped by every error that says why a mount is not,
// or cannot be, served over io_uring.
var ErrNotNegotiated = errors.New("FUSE over io_uring not negotiated")

// Enabled reports whether enable_uring is on. It fails when the kernel has
// no FUSE over io_uring at all.
func Enabled() (bool, error) {
	b, err := os.ReadFile(ParamPath)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w (FUSE over io_uring needs Linux 6.14+ built with CONFIG_FUSE_IO_URING)", ParamPath, err)
	}
	v := strings.TrimSpace(string(b))
	return v == "Y" || v == "1", nil
}

// SetEnabled turns enable_uring on or off (root only) and returns what it
// was, so the caller can put it back. Connections that already negotiated
// io_uring keep it.
func SetEnabled(on bool) (was bool, err error) {
	if was, err = Enabled(); err != nil {
		return false, err
	}
	v := "N"
	if on {
		v = "Y"
	}
	if err := os.WriteFile(ParamPath, []byte(v), 0o644); err != nil {
		return was, fmt.Errorf("setting %s to %s: %w", ParamPath, v, err)
	}
	return was, nil
}

// Available says whether a mount made now could be served over io_uring:
// nil, or an error wrapping ErrNotNegotiated that says why not and how to
// change it.
func Available() error {
	on, err := Enabled()
	if err != nil {
		var u unix.Utsname
		unix.Uname(&u)
		return fmt.Errorf("%w: kernel %s: %v", ErrNotNegotiated, unix.ByteSliceToString(u.Release[:]), err)
	}
	if !on {
		return fmt.Errorf("%w: %s is off (turn it on as root: echo Y > %s)", ErrNotNegotiated, ParamPath, ParamPath)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the io_uring transport mounts with mount(2) and needs root (running as uid %d)", ErrNotNegotiated, os.Geteuid())
	}
	p := ringParams{Flags: setupSQE128}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 2, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return fmt.Errorf("%w: io_uring_setup: %v (see sysctl kernel.io_uring_disabled)", ErrNotNegotiated, errno)
	}
	unix.Close(int(fd))
	return nil
}
