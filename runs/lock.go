package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in a run directory whose flock says the run is in
// progress: the process that made the run (run, provision) holds it until
// it exits, and so does a teardown or an `audit --fix` working on the run.
// It holds that process's pid, for messages. The kernel lets the lock go
// when its holder exits, however it exits: a run whose process died is no
// longer in progress, and any command may tear it down.
const LockFile = "run.lock"

// InProgressError says that another process holds a run's lock: the run is
// in progress (or being torn down), and no other command touches it
// unless forced.
type InProgressError struct {
	Run string
	Pid int // the holder's pid, as it wrote it; 0 if unknown
}

func (e *InProgressError) Error() string {
	who := "another process"
	if e.Pid > 0 {
		who = "pid " + strconv.Itoa(e.Pid)
	}
	return fmt.Sprintf("run %s is in progress (%s holds its lock, %s): left as it is; wait for it to end or stop it, or pass --force to tear it down anyway", e.Run, who, LockFile)
}

// createLock makes dir's lock file and takes its lock, which no one else
// can hold yet.
func createLock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("making the run's lock: %w", err)
	}
	if err := flockNB(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	writePid(f)
	return f, nil
}

// takeLock takes the lock of the run in dir, or fails with an
// *InProgressError naming who holds it. A run without a lock file (made
// before runs had one) is taken without one: nil, nil. So is a run
// directory that is gone, and a run this process holds itself (one
// command, as a test or the run's own code is).
func takeLock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the run's lock: %w", err)
	}
	if err := flockNB(f); errors.Is(err, syscall.EWOULDBLOCK) {
		e := &InProgressError{Run: filepath.Base(dir), Pid: readPid(f)}
		f.Close()
		if e.Pid == os.Getpid() {
			return nil, nil
		}
		return nil, e
	} else if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	writePid(f)
	return f, nil
}

func closeLock(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// TakeOver takes the lock of the run in runDir for a command other than
// the run's own (teardown, `audit --fix`): while another process holds it
// the run is in progress, and TakeOver fails with an *InProgressError,
// unless force, which goes ahead without the lock. release lets the lock
// go; it is never nil.
func TakeOver(runDir string, force bool) (release func(), err error) {
	f, err := takeLock(runDir)
	var ip *InProgressError
	if errors.As(err, &ip) && force {
		return func() {}, nil
	}
	if err != nil {
		return func() {}, err
	}
	return func() { closeLock(f) }, nil
}

// InProgress says whether another process holds the lock of the run in
// runDir, and its pid when it wrote one. This process's own lock (a
// run's final audit of itself) does not count.
func InProgress(runDir string) (bool, int) {
	f, err := os.Open(filepath.Join(runDir, LockFile))
	if err != nil {
		return false, 0
	}
	defer f.Close()
	if err := flockNB(f); err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
		return false, 0
	}
	pid := readPid(f)
	if pid == os.Getpid() {
		return false, pid
	}
	return true, pid
}

func flockNB(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

// writePid writes this process's pid into the lock it holds; a failure
// costs only the pid in messages.
func writePid(f *os.File) {
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
}

func readPid(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}
