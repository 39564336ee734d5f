//go:build linux

package layerfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// Blob verification. A blob's name is its digest, so the Store can tell
// whether a blob still holds the bytes it was named for. A Workspace checks
// each blob the first time it opens it (the kernel then reads the file by
// passthrough, never through the daemon, so a block-by-block check as data
// is read would have nothing to hook into), and before it copies a blob up;
// a damaged or missing blob is EIO to the reader, logged once with the
// blob's digest and the paths that use it. The check reads the blob only
// when its stamp does not hold (stamps.go): a blob this Store wrote, or
// read and found right, and that has not changed since, costs a stat. A
// blob checked once is trusted for the life of the process
// (Store.verified). `layerfsd check` reads every blob.

// ErrBadBlob says a blob is missing or does not hold the bytes its digest
// names. Errors that wrap it are *BlobError. It does not wrap the
// underlying errno: a reader gets EIO, not ENOENT for a file ls shows.
var ErrBadBlob = errors.New("blob is damaged or missing")

// BlobError says what is wrong with one blob.
type BlobError struct {
	Digest  Digest
	Problem string // "missing", or what the content hashes to
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("blob %s is %s", e.Digest, e.Problem)
}

// Is makes errors.Is(err, ErrBadBlob) hold.
func (e *BlobError) Is(target error) bool { return target == ErrBadBlob }

// checkBlob hashes the blob d and compares: nil, or a *BlobError (or
// another error when the blob could not be read for another reason, or ctx
// ended). It returns how many bytes it read.
func (s *Store) checkBlob(ctx context.Context, d Digest) (int64, error) {
	p := s.blobPath(d)
	got, _, read, err := s.digestFile(ctx, p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, &BlobError{Digest: d, Problem: "missing"}
	case err != nil:
		return read, err
	case got != d:
		return read, &BlobError{Digest: d, Problem: "damaged: its content hashes to " + got.String()}
	}
	return read, nil
}

// verifyBlob checks the blob d once per process: the first caller checks
// it (others asking meanwhile wait for that answer), later callers get the
// remembered verdict for a good blob at once. A bad blob is checked again
// each time (it may have been restored). The check is a stat when the
// blob's stamp holds (stamps.go), and a read of every byte otherwise.
func (s *Store) verifyBlob(ctx context.Context, d Digest) error {
	if _, ok := s.verified.Load(d); ok {
		return nil
	}
	m, _ := s.verifying.LoadOrStore(d, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	if _, ok := s.verified.Load(d); ok {
		return nil
	}
	before, err := s.statBlob(d)
	if errors.Is(err, fs.ErrNotExist) {
		return &BlobError{Digest: d, Problem: "missing"}
	}
	if err == nil && s.stampHolds(ctx, d, before) {
		s.verified.Store(d, struct{}{})
		return nil
	}
	_, good, err := s.hashBlob(ctx, d, before)
	if errors.Is(err, ErrBadBlob) {
		s.forgetStamps(ctx, []Digest{d})
	}
	if err != nil {
		return err
	}
	if good != (blobStamp{}) {
		s.recordStamps(ctx, map[Digest]blobStamp{d: good})
	}
	s.verified.Store(d, struct{}{})
	return nil
}

// hashBlob reads the blob d and compares it with its digest (checkBlob).
// before is the blob file's stamp from before the read; the stamp it
// returns is that stamp when the blob is good, did not change while it was
// read and has settled (one to record), and zero otherwise. It returns how
// many bytes it read.
func (s *Store) hashBlob(ctx context.Context, d Digest, before blobStamp) (int64, blobStamp, error) {
	n, err := s.checkBlob(ctx, d)
	s.verifiedBytes.Add(n)
	if err != nil {
		return n, blobStamp{}, err
	}
	if after, serr := s.statBlob(d); serr == nil && after == before && after.settled(time.Now()) {
		return n, after, nil
	}
	return n, blobStamp{}, nil
}

// blobUser is one name that a blob's content is reached by.
type blobUser struct {
	layer LayerID
	path  string
}

// blobUsers finds, in each of layers, the paths whose content is one of
// the blobs in want (at most limit paths per blob in all).
func (s *Store) blobUsers(ctx context.Context, layers []*Layer, want map[Digest]bool, limit int) (map[Digest][]blobUser, error) {
	out := map[Digest][]blobUser{}
	for _, l := range layers {
		var walk func(tree Digest, dir string) error
		walk = func(tree Digest, dir string) error {
			ents, err := s.loadTree(ctx, tree)
			if err != nil {
				return err
			}
			for i := range ents {
				e := &ents[i]
				p := dir + "/" + e.Name
				switch {
				case e.IsDir():
					if err := walk(e.Content, p); err != nil {
						return err
					}
				case e.IsRegular() && want[e.Content] && len(out[e.Content]) < limit:
					out[e.Content] = append(out[e.Content], blobUser{l.ID, p})
				}
			}
			return nil
		}
		if err := walk(l.Root.Content, ""); err != nil {
			return nil, fmt.Errorf("listing users of blobs in layer %s: %w", l.ID.Short(), err)
		}
	}
	return out, nil
}

// referencedBlobs returns every blob some Layer's tree names, with its
// size, reading each distinct tree once, and a line for each tree that
// cannot be read (missing, or damaged: its bytes do not hash to its name).
func (s *Store) referencedBlobs(ctx context.Context) (map[Digest]int64, []*Layer, []string, error) {
	layers, err := s.Log(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	refs := map[Digest]int64{}
	seen := map[Digest]bool{}
	var problems []string
	var walk func(l *Layer, tree Digest, dir string) error
	walk = func(l *Layer, tree Digest, dir string) error {
		if seen[tree] {
			return nil
		}
		seen[tree] = true
		ents, err := s.loadTree(ctx, tree)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			problems = append(problems, fmt.Sprintf("directory %s/ of layer %s: %v", dir, l.ID.Short(), err))
			return nil
		}
		for i := range ents {
			e := &ents[i]
			switch {
			case e.IsDir():
				if err := walk(l, e.Content, dir+"/"+e.Name); err != nil {
					return err
				}
			case e.IsRegular():
				refs[e.Content] = e.Size
			}
		}
		return nil
	}
	for _, l := range layers {
		if err := walk(l, l.Root.Content, ""); err != nil {
			return nil, nil, nil, fmt.Errorf("reading the trees of layer %s: %w", l.ID.Short(), err)
		}
	}
	return refs, layers, problems, nil
}

// BadBlob is a damaged or missing blob as `layerfsd check` reports it.
type BadBlob = daemonapi.BadBlob

// BlobCheck is what CheckBlobs found.
type BlobCheck struct {
	Bad      []BadBlob // damaged or missing blobs, each with what it breaks
	Trees    []string  // trees that could not be read, one line each
	Blobs    int       // blobs read
	Bytes    int64     // bytes read
	Verified []Digest  // the good blobs
}

// CheckBlobs reads every blob the Store records or a Layer names and
// compares it with its digest, with workers in parallel. It returns the
// bad ones, each with the Layers and paths it breaks, the trees it could
// not read on the way, and how many blobs and bytes it read.
func (s *Store) CheckBlobs(ctx context.Context, workers int) (*BlobCheck, error) {
	refs, layers, treeProblems, err := s.referencedBlobs(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.blobRows(ctx)
	if err != nil {
		return nil, err
	}
	all := make([]Digest, 0, len(refs)+len(rows))
	for d := range rows {
		all = append(all, d)
	}
	for d := range refs {
		if _, ok := rows[d]; !ok {
			all = append(all, d)
		}
	}
	sort.Slice(all, func(i, j int) bool { return string(all[i][:]) < string(all[j][:]) })
	if workers <= 0 {
		workers = Workers()
	}
	problems := make([]error, len(all))
	read := make([]int64, len(all))
	stamps := make([]blobStamp, len(all))
	err = parallel(len(all), workers, func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		before, _ := s.statBlob(all[i])
		n, good, err := s.hashBlob(ctx, all[i], before)
		read[i], stamps[i] = n, good
		var be *BlobError
		if errors.As(err, &be) {
			problems[i] = be
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the blobs of %q: %w", s.dir, err)
	}
	res := &BlobCheck{Trees: treeProblems, Blobs: len(all)}
	want := map[Digest]bool{}
	good := map[Digest]blobStamp{}
	var bad []Digest
	for i, p := range problems {
		res.Bytes += read[i]
		if p != nil {
			want[all[i]] = true
			bad = append(bad, all[i])
		} else {
			res.Verified = append(res.Verified, all[i])
			if stamps[i] != (blobStamp{}) {
				good[all[i]] = stamps[i]
			}
		}
	}
	// What was read is known: the good blobs' next first opens cost a
	// stat, and a bad blob whose stamp still held (its bytes changed
	// below the filesystem) is read, and refused, on its next open.
	s.recordStamps(ctx, good)
	if err := s.forgetStamps(ctx, bad); err != nil {
		return nil, fmt.Errorf("forgetting the stamps of %d bad blobs in %q: %w", len(bad), s.dir, err)
	}
	if len(want) == 0 {
		return res, nil
	}
	users, err := s.blobUsers(ctx, layers, want, 1000)
	if err != nil {
		// A damaged tree stops the listing of paths, not the report.
		users = map[Digest][]blobUser{}
	}
	for i, p := range problems {
		if p == nil {
			continue
		}
		d := all[i]
		b := BadBlob{Digest: d.String(), Problem: p.(*BlobError).Problem, Layers: []string{}, Paths: []string{}}
		seenL, seenP := map[LayerID]bool{}, map[string]bool{}
		for _, u := range users[d] {
			if !seenL[u.layer] {
				seenL[u.layer] = true
				b.Layers = append(b.Layers, u.layer.String())
			}
			if !seenP[u.path] {
				seenP[u.path] = true
				b.Paths = append(b.Paths, u.path)
			}
		}
		res.Bad = append(res.Bad, b)
	}
	return res, nil
}

// blobRows returns the blobs table: digest and size.
func (s *Store) blobRows(ctx context.Context) (map[Digest]int64, error) {
	s.statements.Add(1)
	rows, err := s.db.QueryContext(ctx, "SELECT digest, size FROM blobs")
	if err != nil {
		return nil, fmt.Errorf("listing blobs of %q: %w", s.dir, err)
	}
	defer rows.Close()
	out := map[Digest]int64{}
	for rows.Next() {
		var b []byte
		var n int64
		if err := rows.Scan(&b, &n); err != nil {
			return nil, fmt.Errorf("listing blobs of %q: %w", s.dir, err)
		}
		var d Digest
		copy(d[:], b)
		out[d] = n
	}
	return out, rows.Err()
}

// describeBadBlob is one line for a damaged or missing blob: what is
// wrong, and what it breaks.
func describeBadBlob(b BadBlob) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "blob %s is %s", b.Digest, b.Problem)
	if len(b.Layers) == 0 {
		sb.WriteString("; no Layer uses it (layerfsd gc removes it)")
		return sb.String()
	}
	short := make([]string, len(b.Layers))
	for i, l := range b.Layers {
		short[i] = l[:12]
	}
	fmt.Fprintf(&sb, "; it breaks %d layer(s) (%s): %s", len(b.Layers), strings.Join(short, ", "), strings.Join(b.Paths, ", "))
	return sb.String()
}

// badBlob is what a Workspace answers for a blob that failed its check:
// EIO, logged (logCause: once per blob, then counted) with the paths of the
// base Layer that use the blob. The caller holds ws.mu.
func (ws *Workspace) badBlob(ctx context.Context, d Digest, err error) error {
	ws.causesMu.Lock()
	if ws.badBlobs == nil {
		ws.badBlobs = map[Digest]bool{}
	}
	first := !ws.badBlobs[d]
	ws.badBlobs[d] = true
	ws.causesMu.Unlock()
	if !errors.Is(err, ErrBadBlob) {
		return err // not the blob's fault (ctx ended, say): its own errno
	}
	out := fmt.Errorf("reading base file data: %w", err)
	if first {
		var paths []string
		if users, uerr := ws.store.blobUsers(ctx, []*Layer{ws.base}, map[Digest]bool{d: true}, 20); uerr == nil {
			for _, u := range users[d] {
				paths = append(paths, u.path)
			}
		}
		out = fmt.Errorf("%w; used by %s in layer %s of store %s (layerfsd check lists every damaged blob)",
			out, strings.Join(paths, ", "), ws.base.ID.Short(), ws.store.dir)
	}
	ws.logCause(syscall.EIO, out)
	return out
}

// verifyFor checks the blob d of a base file before its data is served or
// copied up: nil, or the error to answer (EIO for a bad blob). The caller
// holds ws.mu.
func (ws *Workspace) verifyFor(ctx context.Context, d Digest) error {
	if ws.noVerify || d.IsZero() {
		// (No blob: a file whose data went with its last name; opening
		// it fails as it always did.)
		return nil
	}
	if err := ws.store.verifyBlob(ctx, d); err != nil {
		return ws.badBlob(ctx, d, err)
	}
	return nil
}
