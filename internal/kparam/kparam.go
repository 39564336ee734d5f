// Package kparam changes a kernel module parameter
// (/sys/module/M/parameters/P) for as long as anyone relies on it, and
// puts it back when the last of them is done.
//
// A module parameter is one value for the whole machine, and several
// runs (and tests) can rely on it at once: the first to turn it on must
// not be the one to put it back while another still relies on it. So
// each holder says so in a file of its own under Dir (a tmpfs, /run,
// cleared at boot as the parameter is); what the parameter read before
// the first holder is kept beside them; and the last holder to let go
// writes that back. Every change is made under a flock of the
// parameter's lock file, held only for the change (or by Exclusive).
//
// A holder is a run directory (its hold lapses once the directory is
// gone: teardown removes it last) or a process (its hold lapses when it
// exits, however it exits).
package kparam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	// SysRoot is put before a parameter's path to read or write it: empty
	// on a host; tests point it at a directory shaped like /sys.
	SysRoot = ""
	// Dir holds each parameter's holders, its lock and what it read
	// before its first holder. Tests point it at a directory of their own.
	Dir = "/run/sealbench/kparam"
)

// ErrChanged is what Release answers when the parameter no longer reads
// what the holders set: someone else changed it since, and it is left as
// it is.
var ErrChanged = errors.New("changed since it was set")

// Holder is one that relies on a parameter: a run directory, or a process.
type Holder struct {
	// RunDir is the run directory whose teardown lets go; the hold
	// lapses once the directory is gone.
	RunDir string `json:"runDir,omitempty"`
	// PID and Start (the process's start time in clock ticks after boot,
	// /proc/PID/stat's 22nd field) name a process; the hold lapses when
	// no process of that pid started then.
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

// RunHolder is the hold of the run in dir, made absolute (whoever lets go
// later may run elsewhere).
func RunHolder(dir string) Holder {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return Holder{RunDir: filepath.Clean(dir)}
}

// ProcessHolder is this process's hold.
func ProcessHolder() (Holder, error) {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return Holder{}, fmt.Errorf("naming this process as a holder: %w", err)
	}
	return Holder{PID: pid, Start: start}, nil
}

func (h Holder) String() string {
	if h.RunDir != "" {
		return "run " + filepath.Base(h.RunDir) + " (" + h.RunDir + ")"
	}
	return "pid " + strconv.Itoa(h.PID)
}

// file is h's file name among a parameter's holders.
func (h Holder) file() string {
	if h.RunDir != "" {
		// By digest: two run directories never share a name, however
		// their paths are spelled.
		sum := sha256.Sum256([]byte(h.RunDir))
		return "run-" + filepath.Base(h.RunDir) + "-" + hex.EncodeToString(sum[:8]) + ".json"
	}
	return "pid-" + strconv.Itoa(h.PID) + "-" + strconv.FormatUint(h.Start, 10) + ".json"
}

// live reports whether h still holds: its run directory is there, or its
// process is.
func (h Holder) live() bool {
	if h.RunDir != "" {
		_, err := os.Stat(h.RunDir)
		return err == nil
	}
	start, err := startTime(h.PID)
	return err == nil && start == h.Start
}

// startTime is pid's start time (/proc/PID/stat's 22nd field).
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Read reads a parameter, trimmed of its newline.
func Read(path string) (string, error) {
	b, err := os.ReadFile(SysRoot + path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func write(path, value string) error {
	return os.WriteFile(SysRoot+path, []byte(value), 0o644)
}

// books is one parameter's directory under Dir.
type books string

func booksOf(path string) books {
	name := strings.TrimPrefix(filepath.Clean(path), "/sys/module/")
	return books(filepath.Join(Dir, strings.NewReplacer("/parameters/", ".", "/", "_").Replace(name)))
}

func (b books) holders() string { return filepath.Join(string(b), "holders") }

// was is the file that keeps what the parameter read before its first
// holder, and what that holder set it to: a line each.
func (b books) was() string { return filepath.Join(string(b), "was") }

func (b books) readWas() (was, value string, err error) {
	raw, err := os.ReadFile(b.was())
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	was = strings.TrimSpace(lines[0])
	if len(lines) > 1 {
		value = strings.TrimSpace(lines[1])
	}
	return was, value, nil
}

// lock takes the parameter's lock, making its directories first.
func (b books) lock() (unlock func(), err error) {
	if err := os.MkdirAll(b.holders(), 0o700); err != nil {
		return nil, fmt.Errorf("making %s: %w", b.holders(), err)
	}
	f, err := os.OpenFile(filepath.Join(string(b), "lock"), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// live lists the holders that still hold, and removes the files of those
// that no longer do. It is called with the lock held.
func (b books) live() ([]Holder, error) {
	ents, err := os.ReadDir(b.holders())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Holder
	for _, e := range ents {
		p := filepath.Join(b.holders(), e.Name())
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var h Holder
		if err := json.Unmarshal(raw, &h); err != nil || (h.RunDir == "" && h.PID == 0) {
			// Half written by a holder that died writing it: a holder's
			// file is complete before its parameter is changed.
			os.Remove(p)
			continue
		}
		if !h.live() {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			continue
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].file() < out[j].file() })
	return out, nil
}

// writeSynced replaces p with data, synced, by a rename: a reader never
// sees half of it. (internal/atomicfile does the same, but imports
// manifests, whose tests import testenv, which imports this package.)
func writeSynced(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Hold sets path to value for h, and returns what it read before its
// first live holder: the value the last holder to let go puts back.
// record is called with that, under the lock and before anything is
// written (a run puts it in its ledger); an error from it, or from
// writing, leaves everything as it was. Holding again what h holds
// already is no error.
func Hold(path, value string, h Holder, record func(was string) error) (was string, err error) {
	b := booksOf(path)
	unlock, err := b.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	live, err := b.live()
	if err != nil {
		return "", err
	}
	cur, err := Read(path)
	if err != nil {
		return "", err
	}
	already := false
	for _, l := range live {
		already = already || l == h
	}
	// What the first holder found is kept until the last lets go. It is
	// there with no live holder only when the holders lapsed without
	// letting go (a run directory removed by hand, a test killed): the
	// parameter then still reads what they set, and what it was before
	// them is what to put back.
	was, first := cur, false
	if w, _, err := b.readWas(); err == nil {
		was = w
	} else if errors.Is(err, fs.ErrNotExist) {
		first = true
	} else {
		return "", err
	}
	undo := func() {
		if !already {
			os.Remove(filepath.Join(b.holders(), h.file()))
		}
		if first {
			os.Remove(b.was())
		}
	}
	if first {
		if err := writeSynced(b.was(), []byte(was+"\n"+value+"\n")); err != nil {
			return "", err
		}
	}
	if record != nil {
		if err := record(was); err != nil {
			undo()
			return was, err
		}
	}
	raw, err := json.Marshal(h)
	if err != nil {
		undo()
		return was, err
	}
	if err := writeSynced(filepath.Join(b.holders(), h.file()), raw); err != nil {
		undo()
		return was, err
	}
	if cur != value {
		if err := write(path, value); err != nil {
			undo()
			return was, fmt.Errorf("setting %s to %s (it is %s): %w", path, value, cur, err)
		}
	}
	return was, nil
}

// Release lets go of h's hold on path (set to value, which read was
// before its first holder). While others still hold it, it is left as it
// is and they are returned. The last holder puts was back, unless the
// parameter no longer reads value (ErrChanged: someone else changed it
// since) or is gone (its module unloaded). Releasing what h does not
// hold is no error: a teardown tried again, or a run made before
// parameters had holders, does the same as the first time.
func Release(path, value, was string, h Holder) (others []Holder, err error) {
	b := booksOf(path)
	unlock, err := b.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := os.Remove(filepath.Join(b.holders(), h.file())); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	live, err := b.live()
	if err != nil || len(live) > 0 {
		return live, err
	}
	os.Remove(b.was())
	cur, err := Read(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case cur == was:
		return nil, nil
	case cur != value:
		return nil, fmt.Errorf("%s reads %s, not the %s it was set to (it was %s before): %w", path, cur, value, was, ErrChanged)
	}
	if err := write(path, was); err != nil {
		return nil, fmt.Errorf("putting %s back to %s: %w", path, was, err)
	}
	return nil, nil
}

// Holders lists who holds path now.
func Holders(path string) ([]Holder, error) {
	b := booksOf(path)
	if _, err := os.Stat(string(b)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	unlock, err := b.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return b.live()
}

// Lapsed reports a parameter that its holders left set without letting
// go (a run directory removed by hand, a test killed): no holder is live,
// and it still reads value, what they set it to, not was, what it read
// before them. PutBack then writes was back.
func Lapsed(path string) (was, value string, ok bool, err error) {
	b := booksOf(path)
	if _, err := os.Stat(b.was()); errors.Is(err, fs.ErrNotExist) {
		return "", "", false, nil
	}
	unlock, err := b.lock()
	if err != nil {
		return "", "", false, err
	}
	defer unlock()
	live, err := b.live()
	if err != nil || len(live) > 0 {
		return "", "", false, err
	}
	was, value, err = b.readWas()
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	cur, err := Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	return was, value, cur == value && cur != was, nil
}

// PutBack writes back what a parameter read before holders that lapsed
// (Lapsed), while none holds it and it still reads what they set.
func PutBack(path string) error {
	was, value, ok, err := Lapsed(path)
	if err != nil || !ok {
		return err
	}
	_, err = Release(path, value, was, Holder{})
	return err
}

// Exclusive waits until no one holds path, and keeps anyone else from
// holding or releasing it until unlock is called: for a test that watches
// the parameter change under it. Its caller must not Hold or Release
// path meanwhile (the lock is not re-entrant). It looks again every
// poll, and gives up with ctx.
func Exclusive(ctx context.Context, path string, poll time.Duration) (unlock func(), err error) {
	b := booksOf(path)
	for {
		unlock, err := b.lock()
		if err != nil {
			return nil, err
		}
		live, err := b.live()
		if err == nil && len(live) == 0 {
			return unlock, nil
		}
		unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s's holders (%v) to let go: %w", path, live, ctx.Err())
		case <-time.After(poll):
		}
	}
}
