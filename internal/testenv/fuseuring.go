package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/kparam"
)

// fuseURingParam is the fuse module's enable_uring (runs.FUSEURingParam,
// layerfs/uring.ParamPath: testenv imports neither).
const fuseURingParam = "/sys/module/fuse/parameters/enable_uring"

// LockFUSEURing takes the machine-wide lock that a test holds for as long as
// it has changed the fuse module's enable_uring parameter, and returns the
// function that releases it. The parameter is kernel-wide and go test runs
// packages' test binaries in parallel, so without the lock one binary could
// turn it off, or put it back, under another one's io_uring mounts. It
// blocks until the lock is free; the kernel releases it however the test
// dies.
func LockFUSEURing() (unlock func(), err error) {
	return LockMachine("sealbench-fuse-enable-uring.lock", "enable_uring for this test")
}

// HoldFUSEURing turns enable_uring on for this process, as a holder
// beside any sealbench run on the machine that relies on it too
// (internal/kparam), under LockFUSEURing; release lets go (the last
// holder puts back what it was) and then the lock.
func HoldFUSEURing() (release func() error, err error) {
	unlock, err := LockFUSEURing()
	if err != nil {
		return nil, err
	}
	h, err := kparam.ProcessHolder()
	if err != nil {
		unlock()
		return nil, err
	}
	was, err := kparam.Hold(fuseURingParam, "Y", h, nil)
	if err != nil {
		unlock()
		return nil, err
	}
	return func() error {
		defer unlock()
		_, err := kparam.Release(fuseURingParam, "Y", was, h)
		return err
	}, nil
}

// LockFUSEURingFree takes LockFUSEURing, then waits until no sealbench
// run on the machine holds enable_uring: for a test that changes it and
// then has sealbench hold it (in this process, so it cannot keep others
// from holding it meanwhile: see ExclusiveFUSEURing).
func LockFUSEURingFree(ctx context.Context) (unlock func(), err error) {
	unlock, err = LockFUSEURing()
	if err != nil {
		return nil, err
	}
	for {
		hs, err := kparam.Holders(fuseURingParam)
		if err == nil && len(hs) == 0 {
			return unlock, nil
		}
		if err == nil {
			err = fmt.Errorf("held by %v", hs)
		}
		select {
		case <-ctx.Done():
			unlock()
			return nil, fmt.Errorf("waiting for enable_uring's holders to let go: %v: %w", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ExclusiveFUSEURing takes LockFUSEURing, waits until no sealbench run on
// the machine holds enable_uring, and keeps any from holding it (or
// letting go) until unlock: for a test that turns it off and on under
// itself. Nothing in its process may hold it meanwhile.
func ExclusiveFUSEURing(ctx context.Context) (unlock func(), err error) {
	unlockTests, err := LockFUSEURing()
	if err != nil {
		return nil, err
	}
	unlockRuns, err := kparam.Exclusive(ctx, fuseURingParam, 250*time.Millisecond)
	if err != nil {
		unlockTests()
		return nil, err
	}
	return func() { unlockRuns(); unlockTests() }, nil
}

// LockMachine takes the machine-wide lock of that name (a file in /run)
// and returns the function that releases it; what says what it guards,
// for an error. It blocks until the lock is free; the kernel releases it
// however the process dies.
func LockMachine(name, what string) (unlock func(), err error) {
	dir := "/run"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", what, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: flock %s: %w", what, p, err)
	}
	return func() { f.Close() }, nil
}

// FakeKernelParam points internal/kparam (and so runs' kernel parameter
// code) at a directory shaped like /sys and at a holders' directory of
// tb's own, for the rest of tb, so that the test changes no real
// parameter; path (/sys/module/M/parameters/P) reads value there, or is
// absent when value is empty (a kernel without it). read reads it back.
func FakeKernelParam(tb testing.TB, path, value string) (read func() string) {
	tb.Helper()
	oldRoot, oldDir := kparam.SysRoot, kparam.Dir
	kparam.SysRoot, kparam.Dir = tb.TempDir(), filepath.Join(tb.TempDir(), "kparam")
	tb.Cleanup(func() { kparam.SysRoot, kparam.Dir = oldRoot, oldDir })
	if value != "" {
		p := filepath.Join(kparam.SysRoot, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return func() string {
		tb.Helper()
		v, err := kparam.Read(path)
		if err != nil {
			tb.Fatal(err)
		}
		return strings.TrimSpace(v)
	}
}
