//go:build linux

package layerfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// Garbage. Commit and import write blobs before the transaction that names
// them, so a failed or stopped one leaves blobs that no Layer references.
// They remove them before they return, and GC removes whatever is left (a
// process killed mid-write leaves some).
//
// The rule that makes both safe: gc.lock in the Store. Every writer (a
// Commit, an import) and every check holds it shared while it runs; GC
// holds it exclusive, and so never runs beside a writer, whose blobs are
// on disk but not yet named by a Layer. A writer that failed removes the
// blobs it created only if it gets the lock exclusive at once (no other
// writer runs, so none can have taken one of its blobs as a duplicate of
// its own); otherwise it leaves them to GC. A mounted Workspace needs no
// lock: it reads only blobs of Layers, and Layers are never removed, so GC
// never removes a blob a Workspace can open.

const gcLockName = "gc.lock"

// storeLock is a hold on gc.lock.
type storeLock struct{ f *os.File }

// lockGC takes gc.lock, shared or exclusive, waiting (while ctx lasts) for
// the other kind to go.
func (s *Store) lockGC(ctx context.Context, exclusive bool) (*storeLock, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, gcLockName), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking store %q: %w", s.dir, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return &storeLock{f}, nil
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("locking store %q: %w", s.dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s of store %q: %w", gcLockName, s.dir, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// tryExclusive turns a shared hold into an exclusive one if no one else
// holds the lock now; the hold is shared (or lost) when it says false.
func (l *storeLock) tryExclusive() bool {
	return unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

func (l *storeLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// removeCreated removes blobs a failed writer created, unless a row names
// them now. The caller holds gc.lock exclusive.
func (s *Store) removeCreated(created []Digest) (int, error) {
	if len(created) == 0 {
		return 0, nil
	}
	rows, err := s.blobRows(context.Background())
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, d := range created {
		if _, ok := rows[d]; ok {
			continue
		}
		if err := os.Remove(s.blobPath(d)); err == nil {
			n++
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// rollback is what a failed writer does with the blobs it created: removed
// when it can take gc.lock exclusive at once, else left to GC. It returns
// a sentence for the error, or "".
func (s *Store) rollback(l *storeLock, created []Digest) string {
	if len(created) == 0 {
		return ""
	}
	if !l.tryExclusive() {
		return fmt.Sprintf("left %d blobs it wrote for `layerfsd gc` (another commit or import is running)", len(created))
	}
	n, err := s.removeCreated(created)
	if err != nil {
		return fmt.Sprintf("removed %d of the %d blobs it wrote (%v); `layerfsd gc` removes the rest", n, len(created), err)
	}
	return ""
}

// GCResult is what GC removed (`layerfsd gc --json`).
type GCResult = daemonapi.GCResult

// GC removes the blobs (files and rows) and trees that no Layer
// references, and every temporary file, holding gc.lock exclusive (it waits
// for running commits and imports, while ctx lasts). A Store whose trees
// cannot all be read is not collected: what they reference is unknown.
func (s *Store) GC(ctx context.Context) (*GCResult, error) {
	t0 := time.Now()
	l, err := s.lockGC(ctx, true)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	refs, layers, problems, err := s.referencedBlobs(ctx)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, &DamageError{Store: s.dir, Check: "trees", Problems: problems}
	}
	trees, err := s.reachableTrees(ctx, layers)
	if err != nil {
		return nil, err
	}
	res := &GCResult{Store: s.dir}
	// Rows first, in one transaction, then files: a crash between
	// leaves files without rows, which the next GC removes.
	rows, err := s.blobRows(ctx)
	if err != nil {
		return nil, err
	}
	stamped, err := s.stampedBlobs(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.allTrees(ctx)
	if err != nil {
		return nil, err
	}
	// (The Store has one connection: the transaction holds it, so every
	// read comes before it.)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("collecting garbage in %q: %w", s.dir, err)
	}
	defer tx.Rollback()
	for d := range rows {
		if _, ok := refs[d]; ok {
			continue
		}
		s.statements.Add(1)
		if _, err := tx.ExecContext(ctx, "DELETE FROM blobs WHERE digest = ?", d[:]); err != nil {
			return nil, fmt.Errorf("collecting garbage in %q: %w", s.dir, err)
		}
		res.BlobRows++
	}
	for _, d := range all {
		if trees[d] {
			continue
		}
		s.statements.Add(1)
		if _, err := tx.ExecContext(ctx, "DELETE FROM trees WHERE digest = ?", d[:]); err != nil {
			return nil, fmt.Errorf("collecting garbage in %q: %w", s.dir, err)
		}
		res.Trees++
	}
	for _, d := range stamped {
		if _, ok := refs[d]; ok {
			continue
		}
		s.statements.Add(1)
		if _, err := tx.ExecContext(ctx, "DELETE FROM blob_stamps WHERE digest = ?", d[:]); err != nil {
			return nil, fmt.Errorf("collecting garbage in %q: %w", s.dir, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("collecting garbage in %q: %w", s.dir, err)
	}
	// Blob files no Layer references.
	for i := 0; i < 256; i++ {
		dir := filepath.Join(s.dir, blobsDir, fmt.Sprintf("%02x", i))
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			d, err := ParseDigest(e.Name())
			if err == nil {
				if _, ok := refs[d]; ok {
					continue
				}
			}
			p := filepath.Join(dir, e.Name())
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && os.Remove(p) == nil {
				res.Blobs++
				res.Bytes += st.Blocks * 512
			}
		}
	}
	// Temporary files: no writer runs (we hold the lock exclusive).
	ents, _ := os.ReadDir(filepath.Join(s.dir, tmpDir))
	for _, e := range ents {
		p := filepath.Join(s.dir, tmpDir, e.Name())
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && os.RemoveAll(p) == nil {
			res.TempFiles++
			res.Bytes += st.Blocks * 512
		}
	}
	res.DurationNs = int64(time.Since(t0))
	return res, nil
}

// reachableTrees is every tree some Layer reaches.
func (s *Store) reachableTrees(ctx context.Context, layers []*Layer) (map[Digest]bool, error) {
	seen := map[Digest]bool{emptyTree: true}
	var walk func(d Digest) error
	walk = func(d Digest) error {
		if seen[d] {
			return nil
		}
		seen[d] = true
		ents, err := s.loadTree(ctx, d)
		if err != nil {
			return err
		}
		for i := range ents {
			if ents[i].IsDir() {
				if err := walk(ents[i].Content); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, l := range layers {
		if err := walk(l.Root.Content); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// allTrees lists the digests of the trees table.
func (s *Store) allTrees(ctx context.Context) ([]Digest, error) {
	return s.queryDigests(ctx, "trees", "SELECT digest FROM trees")
}

// queryDigests runs a query whose one column is a digest (what names
// what is listed, for errors).
func (s *Store) queryDigests(ctx context.Context, what, query string) ([]Digest, error) {
	s.statements.Add(1)
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("listing %s of %q: %w", what, s.dir, err)
	}
	defer rows.Close()
	var out []Digest
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("listing %s of %q: %w", what, s.dir, err)
		}
		var d Digest
		copy(d[:], b)
		out = append(out, d)
	}
	return out, rows.Err()
}
