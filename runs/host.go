package runs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/mountinfo"
)

// Proc is a process on this host, as the kernel shows it (/proc on
// Linux, sysctl on macOS).
type Proc struct {
	Pid       int
	Argv      []string
	StartTime uint64 // when it started (Linux: clock ticks after boot, /proc/PID/stat field 22; macOS: microseconds since the epoch): with Pid, it names one process forever
	// Holds is, for a process FindExiting found (no command line left),
	// the path under the directory it was looked for in that it holds.
	Holds string
}

func (p Proc) String() string {
	if len(p.Argv) == 0 {
		s := fmt.Sprintf("pid %d (no command line: exiting", p.Pid)
		if p.Holds != "" {
			s += ", holding " + p.Holds
		}
		return s + ")"
	}
	return fmt.Sprintf("pid %d (%s)", p.Pid, strings.Join(p.Argv, " "))
}

// MarkedBy matches the argv of a process of ours: exe first and marker
// among the arguments.
func MarkedBy(exe, marker string) func([]string) bool {
	return func(argv []string) bool {
		if len(argv) == 0 || argv[0] != exe {
			return false
		}
		for _, a := range argv[1:] {
			if a == marker {
				return true
			}
		}
		return false
	}
}

// Mount is one mount point from /proc/self/mountinfo.
type Mount = mountinfo.Mount

// MountsUnder lists the mounts at or below dir in this mount namespace,
// deepest first (the order to unmount them in).
func MountsUnder(dir string) ([]Mount, error) { return mountinfo.Under(dir) }

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	ms, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := detach(m.Point); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmounting %s (%s): %w", m.Point, m.FSType, err)
		}
	}
	return nil
}

// removeTree removes dir after detaching every mount under it, so that
// removal never reaches into a mounted filesystem. Absent is done.
func removeTree(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if ms, err := MountsUnder(dir); err != nil {
		return err
	} else if len(ms) > 0 {
		return fmt.Errorf("still mounted under %s: %s; not removing", dir, ms[0].Point)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return ledgerSyncParent(dir)
}

func ledgerSyncParent(p string) error {
	d, err := os.Open(filepath.Dir(p))
	if err != nil {
		return nil // the parent went too: nothing to make durable
	}
	defer d.Close()
	d.Sync()
	return nil
}
