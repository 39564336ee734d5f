package runs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// FindProcs lists the live processes whose argv match, from the kernel's
// process table (sysctl kern.proc.all) and each one's exact argv
// (kern.procargs2). Zombies never match.
func FindProcs(match func(argv []string) bool) []Proc {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	var out []Proc
	self := os.Getpid()
	for _, kp := range kps {
		pid := int(kp.Proc.P_pid)
		if pid <= 0 || pid == self {
			continue
		}
		if p, ok := readProc(pid); ok && match(p.Argv) {
			out = append(out, p)
		}
	}
	return out
}

func readProc(pid int) (Proc, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) || kp.Proc.P_stat == 5 /* SZOMB */ {
		return Proc{}, false
	}
	// kern.procargs2: argc (int32), the executable path, NUL padding,
	// then argc NUL-terminated arguments, then the environment.
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil || len(b) < 4 {
		return Proc{}, false
	}
	argc := int(binary.LittleEndian.Uint32(b[:4]))
	rest := b[4:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return Proc{}, false
	}
	rest = rest[i:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	argv := make([]string, 0, argc)
	for len(argv) < argc && len(rest) > 0 {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			j = len(rest)
		}
		argv = append(argv, string(rest[:j]))
		rest = rest[min(j+1, len(rest)):]
	}
	if len(argv) == 0 {
		return Proc{}, false
	}
	tv := kp.Proc.P_starttime
	return Proc{Pid: pid, Argv: argv, StartTime: uint64(tv.Sec)*1e6 + uint64(tv.Usec)}, true
}

// Kill stops p, if it is still the process that was found (same pid,
// start time and a matching argv): SIGTERM, then SIGKILL after grace.
// macOS has no pidfd, so the check and the signal are two steps; the start
// time makes a recycled pid in between all but impossible. A process
// already gone is not an error.
func Kill(ctx context.Context, p Proc, match func([]string) bool, grace time.Duration) error {
	still := func() bool {
		now, ok := readProc(p.Pid)
		return ok && now.StartTime == p.StartTime && match(now.Argv)
	}
	if !still() {
		return nil
	}
	if err := unix.Kill(p.Pid, unix.SIGTERM); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("signalling %s: %w", p, err)
	}
	if gone(ctx, still, grace) {
		return nil
	}
	if err := unix.Kill(p.Pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("killing %s: %w", p, err)
	}
	if !gone(ctx, still, KillPatience) {
		return fmt.Errorf("%s did not exit after SIGKILL", p)
	}
	return nil
}

// gone waits up to d for still to turn false.
func gone(ctx context.Context, still func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for still() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// detach unmounts a mount point, forcing it (macOS has no lazy unmount).
func detach(point string) error { return unix.Unmount(point, unix.MNT_FORCE) }

// FindExiting finds nothing on macOS: a process there keeps its argv
// (kern.procargs2) until it is a zombie.
func FindExiting(dir string) []Proc { return nil }

// procOf is the process pid now.
func procOf(pid int) (Proc, bool) { return readProc(pid) }

// KillPatience is how long Kill waits for a process to exit after SIGKILL.
const KillPatience = 10 * time.Second
