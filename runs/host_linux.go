package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FindProcs lists the live processes whose argv match. Zombies (empty
// argv) never match: they hold nothing but their pid.
func FindProcs(match func(argv []string) bool) []Proc {
	var out []Proc
	eachPid(func(pid int) {
		p, ok := readProc(pid)
		if ok && len(p.Argv) > 0 && match(p.Argv) {
			out = append(out, p)
		}
	})
	return out
}

// eachPid calls f with the pid of every process but this one.
func eachPid(f func(pid int)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			f(pid)
		}
	}
}

func readProc(pid int) (Proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return Proc{}, false
	}
	st, ok := statProc(pid)
	if !ok || st.state == 'Z' {
		return Proc{}, false
	}
	return Proc{Pid: pid, Argv: strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), StartTime: st.start}, true
}

// procStat is what /proc/PID/stat says that teardown needs.
type procStat struct {
	state byte   // R, S, D, Z...
	flags uint64 // PF_* flags
	start uint64 // clock ticks after boot
}

// pfKthread is the kernel's PF_KTHREAD: a kernel thread, which has no
// command line and is never ours.
const pfKthread = 0x00200000

// statProc reads /proc/PID/stat, which a process has until it is reaped,
// even while it exits with its memory (and so its command line) gone.
func statProc(pid int) (procStat, bool) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	flags, err1 := strconv.ParseUint(f[6], 10, 64)
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], flags: flags, start: start}, true
}

// FindExiting lists the live processes that show no command line and hold
// a file under dir open, or work in a directory under it: a process shows
// no command line while it exits (its memory is being freed, which for a
// VM's gigabytes takes seconds), so FindProcs, which matches command
// lines, no longer sees it, and it is not gone until it has exited.
// Zombies (exited) and kernel threads never match.
func FindExiting(dir string) []Proc {
	var out []Proc
	eachPid(func(pid int) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || len(b) > 0 {
			return
		}
		st, ok := statProc(pid)
		if !ok || st.state == 'Z' || st.flags&pfKthread != 0 {
			return
		}
		if held := heldUnder(pid, dir); held != "" {
			out = append(out, Proc{Pid: pid, StartTime: st.start, Holds: held})
		}
	})
	return out
}

// heldUnder names a path under dir that process pid works in or holds
// open, or "".
func heldUnder(pid int, dir string) string {
	base := fmt.Sprintf("/proc/%d/", pid)
	for _, l := range []string{"cwd", "root"} {
		if t, err := os.Readlink(base + l); err == nil && within(t, dir) {
			return t
		}
	}
	fds, _ := os.ReadDir(base + "fd")
	for _, fd := range fds {
		if t, err := os.Readlink(base + "fd/" + fd.Name()); err == nil && within(t, dir) {
			return t
		}
	}
	return ""
}

// procOf is the process pid now, command line or not (an exiting process
// has none): what the audit names by its pid.
func procOf(pid int) (Proc, bool) {
	if p, ok := readProc(pid); ok {
		return p, true
	}
	st, ok := statProc(pid)
	if !ok || st.state == 'Z' {
		return Proc{}, false
	}
	return Proc{Pid: pid, StartTime: st.start}, true
}

// KillPatience is how long Kill waits for a process to exit after
// SIGKILL: the kernel frees its memory first (seconds for a VM's
// gigabytes), and one in uninterruptible sleep (a FUSE request, say)
// exits only once that ends.
const KillPatience = time.Minute

// Kill stops p, if it is still the process that was found (same pid and
// start time: never a recycled pid), and returns once it has exited: a
// process counts as removed only then. SIGTERM first, then SIGKILL after
// grace, then up to KillPatience for it to exit. The process is held by a
// pidfd from the check on, so no signal can reach another process. It is
// the same process whatever its command line shows now: one that exec'd
// (a wrapper that became QEMU) or is exiting (no command line left) is
// still stopped and waited for; match is consulted only for a Proc whose
// start time is unknown. A process already gone (or a zombie: exited) is
// not an error.
func Kill(ctx context.Context, p Proc, match func([]string) bool, grace time.Duration) error {
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", p, err)
	}
	defer unix.Close(fd)
	st, ok := statProc(p.Pid)
	if !ok || st.state == 'Z' {
		return nil // gone, or exited and not yet reaped
	}
	if p.StartTime == 0 {
		if now, ok := readProc(p.Pid); !ok || !match(now.Argv) {
			return nil
		}
	} else if st.start != p.StartTime {
		return nil // the pid now names another process: ours is gone
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("signalling %s: %w", p, err)
	}
	if exited(ctx, fd, grace) {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("killing %s: %w", p, err)
	}
	if !exited(ctx, fd, KillPatience) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for %s to exit after SIGKILL: %w", p, err)
		}
		return fmt.Errorf("%s has not exited %s after SIGKILL (state %c)", p, KillPatience, stateOf(p.Pid))
	}
	return nil
}

func stateOf(pid int) byte {
	st, _ := statProc(pid)
	return st.state
}

// exited waits up to d for the process behind pidfd fd to exit (the
// pidfd turns readable when it does: a zombie has exited).
func exited(ctx context.Context, fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		ms := int(min(left, 100*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if err == nil && n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return false
		}
	}
}

// detach unmounts a mount point lazily (MNT_DETACH).
func detach(point string) error { return unix.Unmount(point, unix.MNT_DETACH) }
