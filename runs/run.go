package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
)

// StateDirEnv names the environment variable that moves the state directory.
const StateDirEnv = "SEALBENCH_STATE_DIR"

// DefaultStateDir is where run directories live: $SEALBENCH_STATE_DIR, or
// /var/lib/sealbench for root and ~/.local/state/sealbench otherwise.
func DefaultStateDir() string {
	if d := os.Getenv(StateDirEnv); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/sealbench"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "sealbench")
	}
	return filepath.Join(os.TempDir(), "sealbench-"+fmt.Sprint(os.Geteuid()))
}

// RunsDir is the directory of run directories under stateDir.
func RunsDir(stateDir string) string { return filepath.Join(stateDir, "runs") }

// Run is one run: its id, its directory and its ledger. While it is
// open, its process holds the run's lock (LockFile), which tells every
// other command that the run is in progress.
type Run struct {
	ID     string
	Dir    string
	Ledger *ledger.Ledger
	lock   *os.File
}

// NewRunID returns a short unique run id: the UTC time to the second and
// 24 random bits, such as 20261129T085500-3f9a1c.
func NewRunID() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// NewRun makes a new run directory under stateDir with its ledger, whose
// first entry is the run directory itself. The directory appears, by a
// rename, with that entry already durable in it; a crash before leaves only
// a hidden ".new-" directory, which the audit finds.
func NewRun(stateDir string) (*Run, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	runs := RunsDir(abs)
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return nil, fmt.Errorf("making the runs directory: %w", err)
	}
	for range 5 {
		id := NewRunID()
		final := filepath.Join(runs, id)
		if _, err := os.Lstat(final); err == nil {
			continue
		}
		if err := recordRun(abs, id); err != nil {
			return nil, err
		}
		tmp := filepath.Join(runs, ".new-"+id)
		if err := os.Mkdir(tmp, 0o700); err != nil {
			return nil, fmt.Errorf("making run directory: %w", err)
		}
		// The lock is held before the directory has its name, so no other
		// command ever sees the run without it.
		lock, err := createLock(tmp)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
		l, err := ledger.Create(tmp, id)
		if err != nil {
			lock.Close()
			os.RemoveAll(tmp)
			return nil, err
		}
		if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: final, Detail: "the run directory"}); err != nil {
			l.Close()
			lock.Close()
			os.RemoveAll(tmp)
			return nil, err
		}
		if err := os.Rename(tmp, final); err != nil {
			l.Close()
			lock.Close()
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("moving run directory into place: %w", err)
		}
		if err := ledger.SyncDir(runs); err != nil {
			l.Close()
			lock.Close()
			return nil, err
		}
		return &Run{ID: id, Dir: final, Ledger: l, lock: lock}, nil
	}
	return nil, errors.New("could not pick an unused run id")
}

// OpenRun opens run id under stateDir to add to its ledger, holding its
// lock; a run in progress elsewhere is refused (*InProgressError).
func OpenRun(stateDir, id string) (*Run, error) {
	if err := manifests.ValidateRunID(id); err != nil {
		return nil, err
	}
	dir := filepath.Join(RunsDir(stateDir), id)
	lock, err := takeLock(dir)
	if err != nil {
		return nil, err
	}
	l, err := ledger.Open(dir)
	if err != nil {
		closeLock(lock)
		return nil, err
	}
	return &Run{ID: id, Dir: dir, Ledger: l, lock: lock}, nil
}

// Close closes the run's ledger and lets its lock go.
func (r *Run) Close() error {
	err := r.Ledger.Close()
	closeLock(r.lock)
	r.lock = nil
	return err
}

// Refresh reads into the run's ledger what other processes (the bundle's
// runners) appended to it.
func (r *Run) Refresh() error { return r.Ledger.Refresh() }

// ListRuns returns the ids of the run directories under stateDir, oldest
// first (run ids sort by time). Entries that are not run directories are
// left out; the audit reports them.
func ListRuns(stateDir string) ([]string, error) {
	ents, err := os.ReadDir(RunsDir(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && manifests.ValidateRunID(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// Held lists what of the run's ledger entries for target is still there:
// the common half of every Target's Inventory. Entries on a remote host
// are looked for there, over SSH (hosts.json says how); a host that
// cannot be reached is an error: nothing there is shown gone.
func (r *Run) Held(ctx context.Context, target string) ([]Resource, error) {
	entries := r.Ledger.Entries()
	rh, err := newRemoteHosts(r.Dir, entries, SSHOptions{})
	if err != nil {
		return nil, err
	}
	defer rh.close()
	var out []Resource
	for _, e := range entries {
		if e.Target != target {
			continue
		}
		var ok bool
		var detail string
		if e.Host != "" {
			h := rh.get(ctx, e.Host)
			if h.err != nil {
				return nil, fmt.Errorf("%s on %s: the host cannot be reached: %w", e.Name(), e.Host, h.err)
			}
			if h.done {
				continue
			}
			ok, detail, err = h.exists(ctx, e)
		} else {
			ok, detail, err = Exists(ctx, r.Dir, e)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, Resource{Target: target, Run: r.ID, Host: e.Host, Kind: e.Kind, Key: e.Key, Detail: detail})
		}
	}
	return out, nil
}
