//go:build linux

package layerfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ImportOptions are the options of Store.Import.
type ImportOptions struct {
	Message string
	Parent  LayerID // zero for a Layer without a parent
	Workers int     // hashing workers; 0 means Workers()
}

type importNode struct {
	name     string
	path     string
	st       unix.Stat_t
	target   string
	xattrs   []Xattr
	children []*importNode
	blob     Digest
	linkID   uint64
	nlink    uint32
}

func timespecNs(ts unix.Timespec) int64 { return ts.Sec*1e9 + ts.Nsec }

// readXattrs returns the extended attributes of path, sorted by name.
func readXattrs(path string) ([]Xattr, error) {
	sz, err := unix.Llistxattr(path, nil)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing xattrs of %q: %w", path, err)
	}
	if sz == 0 {
		return nil, nil
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(path, buf)
	if err != nil {
		return nil, fmt.Errorf("listing xattrs of %q: %w", path, err)
	}
	var out []Xattr
	for _, name := range splitNul(buf[:sz]) {
		vsz, err := unix.Lgetxattr(path, name, nil)
		if err != nil {
			return nil, fmt.Errorf("reading xattr %q of %q: %w", name, path, err)
		}
		val := make([]byte, vsz)
		vsz, err = unix.Lgetxattr(path, name, val)
		if err != nil {
			return nil, fmt.Errorf("reading xattr %q of %q: %w", name, path, err)
		}
		out = append(out, Xattr{Name: name, Value: val[:vsz]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func splitNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			if i > start {
				out = append(out, string(b[start:i]))
			}
			start = i + 1
		}
	}
	return out
}

func (s *Store) scanTree(n *importNode, files *[]*importNode, inodes map[[2]uint64][]*importNode) error {
	if err := unix.Lstat(n.path, &n.st); err != nil {
		return fmt.Errorf("importing %q: %w", n.path, err)
	}
	x, err := readXattrs(n.path)
	if err != nil {
		return fmt.Errorf("importing: %w", err)
	}
	n.xattrs = x
	switch n.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		ents, err := os.ReadDir(n.path)
		if err != nil {
			return fmt.Errorf("importing %q: %w", n.path, err)
		}
		for _, e := range ents {
			c := &importNode{name: e.Name(), path: filepath.Join(n.path, e.Name())}
			if err := s.scanTree(c, files, inodes); err != nil {
				return err
			}
			n.children = append(n.children, c)
		}
		return nil
	case syscall.S_IFLNK:
		t, err := os.Readlink(n.path)
		if err != nil {
			return fmt.Errorf("importing %q: %w", n.path, err)
		}
		n.target = t
	case syscall.S_IFREG:
		*files = append(*files, n)
	}
	n.nlink = 1
	if n.st.Nlink > 1 {
		k := [2]uint64{n.st.Dev, n.st.Ino}
		inodes[k] = append(inodes[k], n)
	}
	return nil
}

func (n *importNode) entry() Entry {
	return Entry{
		Name: n.name, Mode: n.st.Mode, UID: n.st.Uid, GID: n.st.Gid, Rdev: n.st.Rdev,
		Nlink: n.nlink, Size: n.st.Size,
		Atime: timespecNs(n.st.Atim), Mtime: timespecNs(n.st.Mtim), Ctime: timespecNs(n.st.Ctim),
		Content: n.blob, Target: n.target, LinkID: n.linkID, Xattrs: n.xattrs,
	}
}

// ErrBadSource says an import was given something other than an existing
// directory to import.
var ErrBadSource = errors.New("the import source must be an existing directory")

// CheckImportSource says whether dir can be imported: an existing
// directory. Import checks it too; a command line checks it before it
// opens the Store.
func CheckImportSource(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("importing %q: %w (it does not exist); give --from the directory to import", dir, ErrBadSource)
	} else if err != nil {
		return fmt.Errorf("importing %q: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("importing %q: %w (it is a file); give --from the directory to import", dir, ErrBadSource)
	}
	return nil
}

// Import commits the directory tree at dir as a new Layer: every file is
// copied into the Store (identical content once), with hashing spread over
// workers, and the Layer is written in one transaction.
func (s *Store) Import(ctx context.Context, dir string, opts ImportOptions) (*Layer, error) {
	if err := CheckImportSource(dir); err != nil {
		return nil, err
	}
	if !opts.Parent.IsZero() {
		if _, err := s.Layer(ctx, opts.Parent); err != nil {
			return nil, fmt.Errorf("importing %q: parent: %w", dir, err)
		}
	}
	lock, err := s.lockGC(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("importing %q: %w", dir, err)
	}
	defer lock.unlock()
	var (
		createdMu sync.Mutex
		created   []Digest // blobs this import put in the Store
	)
	// A failed or stopped import removes the blobs it wrote.
	fail := func(err error) (*Layer, error) {
		if why := s.rollback(lock, created); why != "" {
			err = fmt.Errorf("%w; %s", err, why)
		}
		return nil, err
	}
	root := &importNode{path: dir}
	var files []*importNode
	inodes := map[[2]uint64][]*importNode{}
	if err := s.scanTree(root, &files, inodes); err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = Workers()
	}
	nl := &newLayer{blobs: map[Digest]int64{}, trees: map[Digest][]byte{}}
	sizes := make([]int64, len(files))
	err = parallel(len(files), workers, func(i int) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("importing %q: %w", dir, err)
		}
		d, n, isNew, err := s.ingestFile(ctx, files[i].path)
		if isNew {
			createdMu.Lock()
			created = append(created, d)
			createdMu.Unlock()
		}
		if err != nil {
			return fmt.Errorf("importing: %w", err)
		}
		files[i].blob, sizes[i] = d, n
		return nil
	})
	if err != nil {
		return fail(err)
	}
	for i, f := range files {
		nl.blobs[f.blob] = sizes[i]
		// The size is the size of the bytes kept, even if the file
		// changed while it was being imported.
		f.st.Size = sizes[i]
	}
	// Hard links: members of one inode inside the imported tree share a
	// LinkID, numbered in name order so that the same tree gives the same ids.
	for _, g := range inodes {
		if len(g) > 1 {
			for _, n := range g {
				n.nlink = uint32(len(g))
				n.linkID = ^uint64(0) // to number below
			}
		}
	}
	var next uint64
	groups := map[[2]uint64]uint64{}
	var links [][]string
	var build func(n *importNode, rel string) Entry
	build = func(n *importNode, rel string) Entry {
		if n.linkID != 0 {
			k := [2]uint64{n.st.Dev, n.st.Ino}
			id, ok := groups[k]
			if !ok {
				next++
				id = next
				groups[k] = id
				links = append(links, nil)
			}
			n.linkID = id
			links[id-1] = append(links[id-1], rel)
		}
		if n.st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return n.entry()
		}
		sort.Slice(n.children, func(i, j int) bool { return n.children[i].name < n.children[j].name })
		entries := make([]Entry, 0, len(n.children))
		subdirs := 0
		for _, c := range n.children {
			e := build(c, filepath.Join(rel, c.name))
			if e.IsDir() {
				subdirs++
			}
			entries = append(entries, e)
		}
		data, d := encodeTree(entries)
		nl.trees[d] = data
		n.blob = d
		n.nlink = uint32(2 + subdirs)
		return n.entry()
	}
	rootEntry := build(root, "/")
	rootEntry.Name = ""
	now := time.Now()
	l := &Layer{Parent: opts.Parent, Message: opts.Message, Time: now, Root: rootEntry, links: links}
	l.ID = layerID(l.Parent, &l.Root, l.Message, l.Time)
	nl.layer = l
	if err := s.writeLayer(ctx, nl); err != nil {
		return fail(fmt.Errorf("importing %q: %w", dir, err))
	}
	s.stampWritten(ctx, created)
	return l, nil
}
