package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

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
