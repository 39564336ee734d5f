//go:build linux

package layerfs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// ErrAmbiguous says a Layer id prefix matches more than one Layer.
var ErrAmbiguous = errors.New("layer id prefix is ambiguous")

// Layer is an immutable filesystem state.
type Layer struct {
	ID      LayerID `json:"id"`
	Parent  LayerID `json:"parent"` // zero for a Layer without a parent
	Message string  `json:"message"`
	Time    time.Time
	// Root describes the root directory; Root.Content is its tree.
	Root Entry `json:"-"`
	// links lists, per hard-link group, every path of the group.
	links [][]string
}

// Info is the Layer as layerfsd prints it.
func (l *Layer) Info() daemonapi.Layer {
	var parent string
	if !l.Parent.IsZero() {
		parent = l.Parent.String()
	}
	return daemonapi.Layer{ID: l.ID.String(), Parent: parent, Message: l.Message, Time: l.Time.UTC(), Tree: l.Root.Content.String()}
}

// MarshalJSON writes a Layer for people and scripts: its Info.
func (l *Layer) MarshalJSON() ([]byte, error) { return json.Marshal(l.Info()) }

func layerID(parent LayerID, root *Entry, msg string, t time.Time) LayerID {
	h := sha256.New()
	h.Write([]byte("layerfs layer v1\x00"))
	h.Write(parent[:])
	h.Write(encodeEntry(root))
	h.Write(binary.AppendUvarint(nil, uint64(len(msg))))
	h.Write([]byte(msg))
	h.Write(binary.AppendVarint(nil, t.UnixNano()))
	var id LayerID
	h.Sum(id[:0])
	return id
}

func encodeLinks(links [][]string) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(links)))
	for _, g := range links {
		b = binary.AppendUvarint(b, uint64(len(g)))
		for _, p := range g {
			b = binary.AppendUvarint(b, uint64(len(p)))
			b = append(b, p...)
		}
	}
	return b
}

func decodeLinks(b []byte) ([][]string, error) {
	d := decoder{b: b}
	n := d.uvarint()
	if n > uint64(len(b)) {
		return nil, errCorrupt
	}
	links := make([][]string, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		m := d.uvarint()
		if m > uint64(len(b)) {
			return nil, errCorrupt
		}
		g := make([]string, 0, m)
		for j := uint64(0); j < m && d.err == nil; j++ {
			g = append(g, string(d.bytes(d.uvarint())))
		}
		links = append(links, g)
	}
	return links, d.err
}

const layerCols = "id, parent, root, message, time_ns, links"

func scanLayer(sc interface{ Scan(...any) error }) (*Layer, error) {
	var id, parent string
	var root, links []byte
	var tns int64
	l := &Layer{}
	if err := sc.Scan(&id, &parent, &root, &l.Message, &tns, &links); err != nil {
		return nil, err
	}
	var err error
	if l.ID, err = ParseLayerID(id); err != nil {
		return nil, err
	}
	if parent != "" {
		if l.Parent, err = ParseLayerID(parent); err != nil {
			return nil, err
		}
	}
	if l.Root, err = decodeEntry(root); err != nil {
		return nil, fmt.Errorf("layer %s root entry: %w", l.ID.Short(), err)
	}
	if l.links, err = decodeLinks(links); err != nil {
		return nil, fmt.Errorf("layer %s links: %w", l.ID.Short(), err)
	}
	l.Time = time.Unix(0, tns)
	return l, nil
}

// Layer returns one Layer.
func (s *Store) Layer(ctx context.Context, id LayerID) (*Layer, error) {
	s.statements.Add(1)
	l, err := scanLayer(s.db.QueryRowContext(ctx, "SELECT "+layerCols+" FROM layers WHERE id = ?", id.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("reading layer %s from %q: %w", id.Short(), s.dir, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading layer %s from %q: %w", id.Short(), s.dir, err)
	}
	return l, nil
}

// Head returns the most recently created Layer, or nil if the Store has none.
func (s *Store) Head(ctx context.Context) (*Layer, error) {
	s.statements.Add(1)
	l, err := scanLayer(s.db.QueryRowContext(ctx, "SELECT "+layerCols+" FROM layers ORDER BY seq DESC LIMIT 1"))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading newest layer of %q: %w", s.dir, err)
	}
	return l, nil
}

// Log returns every Layer, newest first.
func (s *Store) Log(ctx context.Context) ([]*Layer, error) {
	s.statements.Add(1)
	rows, err := s.db.QueryContext(ctx, "SELECT "+layerCols+" FROM layers ORDER BY seq DESC")
	if err != nil {
		return nil, fmt.Errorf("listing layers of %q: %w", s.dir, err)
	}
	defer rows.Close()
	var out []*Layer
	for rows.Next() {
		l, err := scanLayer(rows)
		if err != nil {
			return nil, fmt.Errorf("listing layers of %q: %w", s.dir, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing layers of %q: %w", s.dir, err)
	}
	return out, nil
}

// ResolveLayer finds the Layer whose id starts with prefix (at least 4 hex
// digits), or says why none or more than one does.
func (s *Store) ResolveLayer(ctx context.Context, prefix string) (*Layer, error) {
	prefix = strings.ToLower(strings.TrimSpace(prefix))
	if len(prefix) < 4 || len(prefix) > 64 || strings.Trim(prefix, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("resolving layer %q: %w (want 4 to 64 hex digits)", prefix, ErrNotFound)
	}
	s.statements.Add(1)
	rows, err := s.db.QueryContext(ctx, "SELECT "+layerCols+" FROM layers WHERE id >= ? AND id < ? LIMIT 2", prefix, prefix+"g")
	if err != nil {
		return nil, fmt.Errorf("resolving layer %q in %q: %w", prefix, s.dir, err)
	}
	defer rows.Close()
	var found []*Layer
	for rows.Next() {
		l, err := scanLayer(rows)
		if err != nil {
			return nil, fmt.Errorf("resolving layer %q in %q: %w", prefix, s.dir, err)
		}
		found = append(found, l)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("resolving layer %q in %q: %w", prefix, s.dir, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("resolving layer %q in %q: %w", prefix, s.dir, ErrAmbiguous)
}

// newLayer is what a Commit or an import writes: blobs already installed on
// disk, tree objects, and the Layer row, all in one transaction.
type newLayer struct {
	blobs map[Digest]int64
	trees map[Digest][]byte
	layer *Layer
}

func (s *Store) writeLayer(ctx context.Context, nl *newLayer) error {
	if err := s.syncBlobs(); err != nil {
		return err
	}
	l := nl.layer
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing layer %s to %q: %w", l.ID.Short(), s.dir, err)
	}
	defer tx.Rollback()
	s.statements.Add(1)
	if len(nl.blobs) > 0 {
		st, err := tx.PrepareContext(ctx, "INSERT OR IGNORE INTO blobs(digest, size) VALUES (?, ?)")
		if err != nil {
			return fmt.Errorf("writing layer %s to %q: %w", l.ID.Short(), s.dir, err)
		}
		for _, d := range sortedDigests(nl.blobs) {
			s.statements.Add(1)
			if _, err := st.ExecContext(ctx, d[:], nl.blobs[d]); err != nil {
				st.Close()
				return fmt.Errorf("writing blob %s to %q: %w", d.Short(), s.dir, err)
			}
		}
		st.Close()
	}
	if len(nl.trees) > 0 {
		st, err := tx.PrepareContext(ctx, "INSERT OR IGNORE INTO trees(digest, data) VALUES (?, ?)")
		if err != nil {
			return fmt.Errorf("writing layer %s to %q: %w", l.ID.Short(), s.dir, err)
		}
		for _, d := range sortedDigests(nl.trees) {
			s.statements.Add(1)
			if _, err := st.ExecContext(ctx, d[:], nl.trees[d]); err != nil {
				st.Close()
				return fmt.Errorf("writing tree %s to %q: %w", d.Short(), s.dir, err)
			}
		}
		st.Close()
	}
	var parent string
	if !l.Parent.IsZero() {
		parent = l.Parent.String()
	}
	s.statements.Add(1)
	if _, err := tx.ExecContext(ctx, "INSERT INTO layers(id, parent, root, message, time_ns, links) VALUES (?, ?, ?, ?, ?, ?)",
		l.ID.String(), parent, encodeEntry(&l.Root), l.Message, l.Time.UnixNano(), encodeLinks(l.links)); err != nil {
		return fmt.Errorf("writing layer %s to %q: %w", l.ID.Short(), s.dir, err)
	}
	s.statements.Add(1)
	failpoint("layer-tx")
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing layer %s to %q: %w", l.ID.Short(), s.dir, err)
	}
	return nil
}

// sortedDigests returns m's digests in order. Rows go into the database in
// this order so that the same Layer written twice gives a database of the
// same size: a B-tree's pages depend on the order of its inserts, and a
// run compares the Store's bytes across targets as an exact count.
func sortedDigests[V any](m map[Digest]V) []Digest {
	ds := make([]Digest, 0, len(m))
	for d := range m {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return string(ds[i][:]) < string(ds[j][:]) })
	return ds
}

// emptyRoot is the root of a Store with no Layers: an empty directory.
func emptyRoot() Entry {
	now := time.Now().UnixNano()
	return Entry{Mode: 0o040755, Nlink: 2, Atime: now, Mtime: now, Ctime: now, Content: emptyTree}
}
