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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Proc
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		p, ok := readProc(pid)
		if ok && len(p.Argv) > 0 && match(p.Argv) {
			out = append(out, p)
		}
	}
	return out
}

func readProc(pid int) (Proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return Proc{}, false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, false
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return Proc{}, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Proc{}, false
	}
	return Proc{Pid: pid, Argv: strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), StartTime: start}, true
}

// Kill stops p, if it is still the process that was found (same pid,
// start time and a matching argv: never a recycled pid): SIGTERM, then
// SIGKILL after grace. The process is held by a pidfd from the check on,
// so the signal cannot reach another process. A process already gone is
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
	now, ok := readProc(p.Pid)
	if !ok || now.StartTime != p.StartTime || !match(now.Argv) {
		return nil // gone, or the pid now names another process: ours is gone
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
	if !exited(ctx, fd, 10*time.Second) {
		return fmt.Errorf("%s did not exit after SIGKILL", p)
	}
	return nil
}

// exited waits up to d for the process behind pidfd fd to exit.
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
