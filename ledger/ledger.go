// Package ledger writes and reads a run's ledger (manifests.LedgerFile):
// one line per resource, appended and fsync'd before the resource is
// created, so that whatever a crash leaves behind is named in it; and a
// retraction line for a resource whose create failed with nothing made
// (Retract), which readers then pass.
package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// Ledger appends to one run's ledger. It is safe for concurrent use, by
// goroutines and by processes: Record holds an flock on the file and
// first reads what other processes appended (the runners of a run's
// groups append to its ledger at once), so sequence numbers stay unique
// and a resource another process recorded is not recorded twice.
type Ledger struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	runID   string
	seq     int
	entries []manifests.LedgerEntry
	size    int64 // the file's size as of the last line read or written

	// AfterRecord, when set, is called after each entry is durable and
	// before Record returns (before the resource is created). Tests use it
	// to stop a process at a chosen point.
	AfterRecord func(manifests.LedgerEntry)
}

// Create starts the ledger of run runID in dir; it must not exist yet.
func Create(dir, runID string) (*Ledger, error) {
	if err := manifests.ValidateRunID(runID); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, manifests.LedgerFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating ledger: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &Ledger{f: f, path: p, runID: runID}, nil
}

// Open opens an existing ledger in dir to append to it. A cut-off last
// line (a crash while recording) is cut away first, so that appends start
// on a line of their own.
func Open(dir string) (*Ledger, error) {
	p := filepath.Join(dir, manifests.LedgerFile)
	entries, warnings, err := readAll(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening ledger: %w", err)
	}
	if len(warnings) > 0 {
		if err := cutPartialLine(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("cutting the partial last line of %s: %w", p, err)
		}
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &Ledger{f: f, path: p, entries: entries, size: size}
	if len(entries) > 0 {
		l.runID = entries[0].RunID
		l.seq = entries[len(entries)-1].Seq
	} else {
		l.runID = filepath.Base(dir)
	}
	return l, nil
}

// Read reads the ledger in dir: the entries that stand
// (manifests.Standing: no retraction, nor an entry retracted). A cut-off
// last line is a warning, not an error (see manifests.ReadLedger).
func Read(dir string) ([]manifests.LedgerEntry, []error, error) {
	e, w, err := readAll(dir)
	return manifests.Standing(e), w, err
}

// readAll reads every line of the ledger in dir, retractions included.
func readAll(dir string) ([]manifests.LedgerEntry, []error, error) {
	p := filepath.Join(dir, manifests.LedgerFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, fmt.Errorf("reading ledger: %w", err)
	}
	defer f.Close()
	e, w, err := manifests.ReadLedger(f)
	if err != nil {
		return nil, nil, fmt.Errorf("reading ledger %s: %w", p, err)
	}
	return e, w, nil
}

// Path is the ledger file's path.
func (l *Ledger) Path() string { return l.path }

// RunID is the run the ledger belongs to.
func (l *Ledger) RunID() string { return l.runID }

// Entries returns what has been recorded so far and stands (not
// retracted).
func (l *Ledger) Entries() []manifests.LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]manifests.LedgerEntry(nil), manifests.Standing(l.entries)...)
}

// Record appends e (its RunID, Seq and Time are filled in) and makes it
// durable. Recording the same target, kind and key again is a no-op: a
// resource is created again under the entry that already names it.
func (l *Ledger) Record(e manifests.LedgerEntry) error {
	return l.caughtUp("recording in", func() error { return l.append(e) })
}

// Retract takes back the standing entry of e's resource (the same target,
// kind, key, Engine and host), recorded before a create that then failed
// with nothing made: a line retracting it is appended, saying why, and
// teardown and the audit pass both (manifests.LedgerEntry.Retracts). Only
// a create the caller knows made nothing may be retracted: what may
// exist stays recorded. No such entry: nothing to do.
func (l *Ledger) Retract(e manifests.LedgerEntry, why string) error {
	return l.caughtUp("retracting in", func() error {
		standing := manifests.Standing(l.entries)
		for i := len(standing) - 1; i >= 0; i-- {
			if old := standing[i]; old.SameResource(&e) {
				old.Retracts, old.Detail = old.Seq, why
				return l.write(old)
			}
		}
		return nil
	})
}

// append is Record's, caught up and holding the ledger.
func (l *Ledger) append(e manifests.LedgerEntry) error {
	for _, old := range manifests.Standing(l.entries) {
		if old.Target == e.Target && old.Kind == e.Kind && old.Key == e.Key && old.Engine == e.Engine {
			return nil
		}
	}
	return l.write(e)
}

// write appends e as the next line, durable before it returns.
func (l *Ledger) write(e manifests.LedgerEntry) error {
	e.RunID, e.Seq, e.Time = l.runID, l.seq+1, time.Now().UTC()
	e.FillDefaults()
	if err := e.Validate(); err != nil {
		return fmt.Errorf("recording %s: %w", e.Name(), err)
	}
	b, err := e.MarshalLine()
	if err != nil {
		return err
	}
	// At the end as this process knows it, which catchUp made the file's.
	if _, err := l.f.Seek(l.size, io.SeekStart); err != nil {
		return err
	}
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("recording %s in %s: %w", e.Name(), l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", l.path, err)
	}
	l.size += int64(len(b))
	l.seq++
	l.entries = append(l.entries, e)
	if l.AfterRecord != nil {
		l.AfterRecord(e)
	}
	return nil
}

// lockFile takes the flock that makes one process at a time append.
func (l *Ledger) lockFile() (func(), error) {
	fd := int(l.f.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		if err == nil {
			return func() { syscall.Flock(fd, syscall.LOCK_UN) }, nil
		}
		if err != syscall.EINTR {
			return nil, fmt.Errorf("locking %s: %w", l.path, err)
		}
	}
}

// Refresh reads what other processes appended since this one last read
// or wrote (a runner's Sandboxes, say), so that Entries lists them.
func (l *Ledger) Refresh() error {
	return l.caughtUp("refreshing", func() error { return nil })
}

// caughtUp runs f holding the ledger (its mutex, and the file's flock
// against other processes), once what the others appended is read.
func (l *Ledger) caughtUp(what string, f func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("%s a closed ledger", what)
	}
	unlock, err := l.lockFile()
	if err != nil {
		return err
	}
	defer unlock()
	if err := l.catchUp(); err != nil {
		return err
	}
	return f()
}

// catchUp reads the lines other processes appended since this one last
// read or wrote: each is one whole write made under the flock, so a last
// line cut off is a writer's that died mid-write, and is cut away, as
// Open does.
func (l *Ledger) catchUp() error {
	fi, err := l.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == l.size {
		return nil
	}
	if fi.Size() < l.size {
		return fmt.Errorf("%s shrank from %d to %d bytes while open: something else rewrote it", l.path, l.size, fi.Size())
	}
	b := make([]byte, fi.Size()-l.size)
	if _, err := l.f.ReadAt(b, l.size); err != nil {
		return fmt.Errorf("reading what was appended to %s: %w", l.path, err)
	}
	whole := bytes.LastIndexByte(b, '\n') + 1
	more, _, err := manifests.ReadLedger(bytes.NewReader(b[:whole]))
	if err != nil {
		return fmt.Errorf("reading what was appended to %s: %w", l.path, err)
	}
	if whole < len(b) {
		if err := l.f.Truncate(l.size + int64(whole)); err != nil {
			return fmt.Errorf("cutting the partial last line of %s: %w", l.path, err)
		}
		if err := l.f.Sync(); err != nil {
			return err
		}
	}
	for i, e := range more {
		if e.RunID != l.runID || e.Seq <= l.seq {
			return fmt.Errorf("%s: an appended entry (run %s, seq %d) does not follow run %s, seq %d", l.path, e.RunID, e.Seq, l.runID, l.seq)
		}
		if e.Retracts > 0 && !slices.ContainsFunc(slices.Concat(l.entries, more[:i]), func(o manifests.LedgerEntry) bool {
			return o.Seq == e.Retracts && o.Retracts == 0 && o.SameResource(&e)
		}) {
			return fmt.Errorf("%s: an appended entry (seq %d) retracts seq %d, which is not an earlier entry of the same resource", l.path, e.Seq, e.Retracts)
		}
		l.seq = e.Seq
	}
	l.entries = append(l.entries, more...)
	l.size += int64(whole)
	return nil
}

// Close closes the ledger file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

func cutPartialLine(f *os.File) error {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	n := len(b)
	for n > 0 && b[n-1] != '\n' {
		n--
	}
	if err := f.Truncate(int64(n)); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// SyncDir fsyncs a directory, so that an entry just made in it survives a
// crash.
func SyncDir(dir string) error { return syncDir(dir) }
