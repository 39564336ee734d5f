//go:build linux

package layerfs

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// Change is one difference between two Layers: its Kind is
// daemonapi.Added, Deleted, Modified or Metadata.
type Change = daemonapi.Change

// Diff lists how Layer b differs from Layer a, sorted by path. Subtrees whose
// tree objects are equal are skipped without being read.
func (s *Store) Diff(ctx context.Context, a, b *Layer) ([]Change, error) {
	var out []Change
	ra, rb := a.Root, b.Root
	if err := s.diffEntry(ctx, "/", &ra, &rb, &out); err != nil {
		return nil, fmt.Errorf("diffing layers %s and %s: %w", a.ID.Short(), b.ID.Short(), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func metaEqual(x, y *Entry) bool {
	x2, y2 := *x, *y
	x2.Content, y2.Content = Digest{}, Digest{}
	x2.Nlink, y2.Nlink = 0, 0
	x2.Name, y2.Name = "", ""
	if x.IsDir() {
		x2.Size, y2.Size = 0, 0
	}
	return bytes.Equal(encodeEntry(&x2), encodeEntry(&y2))
}

func (s *Store) diffEntry(ctx context.Context, p string, x, y *Entry, out *[]Change) error {
	if x.Type() != y.Type() {
		*out = append(*out, Change{Kind: daemonapi.Deleted, Path: p}, Change{Kind: daemonapi.Added, Path: p})
		if x.IsDir() {
			if err := s.diffTrees(ctx, p, x.Content, emptyTree, out); err != nil {
				return err
			}
		}
		if y.IsDir() {
			return s.diffTrees(ctx, p, emptyTree, y.Content, out)
		}
		return nil
	}
	if !x.IsDir() && (x.Content != y.Content || x.Target != y.Target || x.Rdev != y.Rdev || x.Size != y.Size) {
		*out = append(*out, Change{Kind: daemonapi.Modified, Path: p})
	} else if !metaEqual(x, y) {
		*out = append(*out, Change{Kind: daemonapi.Metadata, Path: p})
	}
	if x.IsDir() && x.Content != y.Content {
		return s.diffTrees(ctx, p, x.Content, y.Content, out)
	}
	return nil
}

func (s *Store) diffTrees(ctx context.Context, dir string, a, b Digest, out *[]Change) error {
	ea, err := s.loadTree(ctx, a)
	if err != nil {
		return err
	}
	eb, err := s.loadTree(ctx, b)
	if err != nil {
		return err
	}
	ma := make(map[string]*Entry, len(ea))
	for i := range ea {
		ma[ea[i].Name] = &ea[i]
	}
	for i := range eb {
		y := &eb[i]
		p := path.Join(dir, y.Name)
		x, ok := ma[y.Name]
		if !ok {
			*out = append(*out, Change{Kind: daemonapi.Added, Path: p})
			if y.IsDir() {
				if err := s.diffTrees(ctx, p, emptyTree, y.Content, out); err != nil {
					return err
				}
			}
			continue
		}
		delete(ma, y.Name)
		if err := s.diffEntry(ctx, p, x, y, out); err != nil {
			return err
		}
	}
	for name, x := range ma {
		p := path.Join(dir, name)
		*out = append(*out, Change{Kind: daemonapi.Deleted, Path: p})
		if x.IsDir() {
			if err := s.diffTrees(ctx, p, x.Content, emptyTree, out); err != nil {
				return err
			}
		}
	}
	return nil
}
