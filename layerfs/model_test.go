//go:build linux

package layerfs

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/layerfs/uring"
)

// snapshot describes a tree for comparison: per path, type, permissions,
// owner, size, link count, content or target, and optionally times.
func snapshot(t *testing.T, root string, times bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d", st.Mode, st.Uid, st.Gid)
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" size=%d nlink=%d content=%x", st.Size, st.Nlink, sha(b))
		case syscall.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " target=" + target
		case syscall.S_IFDIR:
			desc += fmt.Sprintf(" nlink=%d", st.Nlink)
		}
		if times {
			desc += fmt.Sprintf(" mtime=%d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
			if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				desc += fmt.Sprintf(" ctime=%d.%09d", st.Ctim.Sec, st.Ctim.Nsec)
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

func sha(b []byte) []byte {
	d, _, _ := hashBytes(b)
	return d[:6]
}

func hashBytes(b []byte) (Digest, int64, error) {
	var d Digest
	h := newSHA()
	h.Write(b)
	h.Sum(d[:0])
	return d, int64(len(b)), nil
}

func diffSnapshots(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, fmt.Sprintf("%s: only in first: %s", k, v))
		} else if v != w {
			out = append(out, fmt.Sprintf("%s:\n\t%s\n\t%s", k, v, w))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: only in second: %s", k, v))
		}
	}
	sort.Strings(out)
	return out
}

type modelRun struct {
	t       *testing.T
	rng     *rand.Rand
	native  string
	s       *Store
	ws      *Workspace
	names   int
	commits int
	overlay string // MountOptions.OverlayDir
	// transport is MountOptions.Transport, for every mount of the run.
	transport uring.Transport
	log       []string
}

// entries lists the paths under the native tree, relative, root excluded.
func (m *modelRun) entries(filter func(os.FileMode) bool) []string {
	var out []string
	filepath.WalkDir(m.native, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == m.native {
			return nil
		}
		if filter == nil || filter(d.Type()) {
			rel, _ := filepath.Rel(m.native, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func (m *modelRun) pick(filter func(os.FileMode) bool) (string, bool) {
	e := m.entries(filter)
	if len(e) == 0 {
		return "", false
	}
	return e[m.rng.Intn(len(e))], true
}

func (m *modelRun) dir() string {
	if m.rng.Intn(4) == 0 {
		return "."
	}
	d, ok := m.pick(func(t os.FileMode) bool { return t.IsDir() })
	if !ok {
		return "."
	}
	return d
}

func (m *modelRun) newName() string {
	m.names++
	return filepath.Join(m.dir(), "n"+strconv.Itoa(m.names))
}

func (m *modelRun) data() []byte {
	n := m.rng.Intn(2048)
	if m.rng.Intn(20) == 0 {
		n = m.rng.Intn(1 << 20)
	}
	b := make([]byte, n)
	m.rng.Read(b)
	return b
}

func isFile(t os.FileMode) bool     { return t.IsRegular() }
func notDir(t os.FileMode) bool     { return !t.IsDir() }
func notSymlink(t os.FileMode) bool { return t&os.ModeSymlink == 0 }

// both applies op to the native tree and to the workspace and insists both
// answer the same errno.
func (m *modelRun) both(desc string, op func(root string) error) {
	m.log = append(m.log, desc)
	e1 := op(m.native)
	e2 := op(m.ws.Mountpoint())
	if errno(e1) != errno(e2) || (e1 == nil) != (e2 == nil) {
		m.t.Fatalf("op %d %s: native says %v, workspace says %v\nrecent ops: %q", len(m.log), desc, e1, e2, tail(m.log, 10))
	}
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func writeAt(p string, flags int, off int64, b []byte) error {
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return err
	}
	if off >= 0 {
		_, err = f.WriteAt(b, off)
	} else {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (m *modelRun) step() {
	r := m.rng
	switch k := r.Intn(100); {
	case k < 18:
		p, b := m.newName(), m.data()
		if r.Intn(3) == 0 {
			if q, ok := m.pick(isFile); ok {
				p = q
			}
		}
		m.both("write "+p, func(root string) error {
			return writeAt(filepath.Join(root, p), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, -1, b)
		})
	case k < 26:
		if p, ok := m.pick(isFile); ok {
			b := m.data()
			m.both("append "+p, func(root string) error { return writeAt(filepath.Join(root, p), os.O_WRONLY|os.O_APPEND, -1, b) })
		}
	case k < 34:
		if p, ok := m.pick(isFile); ok {
			b, off := m.data(), int64(r.Intn(4096))
			flags := os.O_RDWR
			if r.Intn(2) == 0 {
				flags = os.O_WRONLY // a lazy copy-up, for a base file
			}
			m.both("pwrite "+p, func(root string) error { return writeAt(filepath.Join(root, p), flags, off, b) })
		}
	case k < 39:
		if p, ok := m.pick(isFile); ok {
			sz := int64(r.Intn(8192))
			m.both("truncate "+p, func(root string) error { return os.Truncate(filepath.Join(root, p), sz) })
		}
	case k < 47:
		if p, ok := m.pick(notDir); ok {
			m.both("unlink "+p, func(root string) error { return syscall.Unlink(filepath.Join(root, p)) })
		}
	case k < 55:
		p := m.newName()
		mode := uint32(0o700 + r.Intn(0o100))
		m.both("mkdir "+p, func(root string) error { return syscall.Mkdir(filepath.Join(root, p), mode) })
	case k < 60:
		if p, ok := m.pick(func(t os.FileMode) bool { return t.IsDir() }); ok {
			m.both("rmdir "+p, func(root string) error { return syscall.Rmdir(filepath.Join(root, p)) })
		}
	case k < 72:
		src, ok := m.pick(nil)
		if !ok {
			return
		}
		dst := m.newName()
		if r.Intn(3) == 0 {
			if q, ok := m.pick(nil); ok {
				dst = q
			}
		}
		m.both("rename "+src+" "+dst, func(root string) error {
			return syscall.Rename(filepath.Join(root, src), filepath.Join(root, dst))
		})
	case k < 77:
		p, target := m.newName(), "t"+strconv.Itoa(r.Intn(100))
		m.both("symlink "+p, func(root string) error { return os.Symlink(target, filepath.Join(root, p)) })
	case k < 83:
		if src, ok := m.pick(isFile); ok {
			dst := m.newName()
			m.both("link "+src+" "+dst, func(root string) error { return os.Link(filepath.Join(root, src), filepath.Join(root, dst)) })
		}
	case k < 89:
		if p, ok := m.pick(notSymlink); ok {
			mode := uint32(r.Intn(0o1000))
			if fi, _ := os.Lstat(filepath.Join(m.native, p)); fi != nil && fi.IsDir() {
				mode |= 0o700 // keep directories walkable
			}
			m.both(fmt.Sprintf("chmod %s %o", p, mode), func(root string) error { return syscall.Chmod(filepath.Join(root, p), mode) })
		}
	case k < 95:
		if p, ok := m.pick(nil); ok {
			ts := time.Unix(int64(1e9+r.Intn(1e9)), int64(r.Intn(1e9)))
			m.both("utimes "+p, func(root string) error { return os.Chtimes(filepath.Join(root, p), ts, ts) })
		}
	case k < 98:
		m.commitAndCompare()
	default:
		m.remount()
	}
}

func (m *modelRun) compare(when string) {
	if d := diffSnapshots(snapshot(m.t, m.native, false), snapshot(m.t, m.ws.Mountpoint(), false)); len(d) > 0 {
		m.t.Fatalf("%s: workspace differs from native after %d ops:\n%s\nrecent ops: %q", when, len(m.log), d, tail(m.log, 15))
	}
}

func (m *modelRun) commitAndCompare() {
	res, err := m.ws.Commit(context.Background(), fmt.Sprintf("commit %d", m.commits))
	if err != nil {
		m.t.Fatalf("commit after %d ops: %v", len(m.log), err)
	}
	m.commits++
	m.log = append(m.log, "commit")
	m.compare("after commit")
	again, err := m.ws.Commit(context.Background(), "again")
	if err != nil || !again.UpToDate {
		if err == nil {
			d, _ := m.s.Diff(context.Background(), res.Layer, again.Layer)
			m.t.Logf("diff between the two commits: %v", d)
		}
		m.t.Fatalf("second commit after %d ops: %+v %v (first: %+v)", len(m.log), again, err, res)
	}
}

// remount commits, unmounts, mounts the new Layer and checks that it shows
// exactly what the old mount showed, times included.
func (m *modelRun) remount() {
	m.commitAndCompare()
	before := snapshot(m.t, m.ws.Mountpoint(), true)
	l := m.ws.Base()
	if _, err := m.ws.Unmount(5 * time.Second); err != nil {
		m.t.Fatal(err)
	}
	ws, err := Mount(context.Background(), m.s, m.ws.Mountpoint(), MountOptions{Layer: l, OverlayDir: m.overlay, Transport: m.transport})
	if err != nil {
		m.t.Fatal(err)
	}
	m.ws = ws
	m.log = append(m.log, "remount")
	after := snapshot(m.t, m.ws.Mountpoint(), true)
	if d := diffSnapshots(before, after); len(d) > 0 {
		m.t.Fatalf("after remount of %s the layer differs:\n%s", l.ID.Short(), d)
	}
	m.compare("after remount")
}

func TestModel(t *testing.T) {
	needFUSE(t)
	ops := 2500
	if testing.Short() {
		ops = 300
	}
	seeds := []int64{1, 2}
	if v := os.Getenv("LAYERFS_MODEL_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int64{n}
	}
	forTransports(t, func(t *testing.T, tr uring.Transport) {
		for _, seed := range seeds {
			testModel(t, tr, seed, ops)
		}
	})
}

func testModel(t *testing.T, tr uring.Transport, seed int64, ops int) {
	t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
		s := newStore(t, ProfileFast)
		native := t.TempDir()
		// A base layer with some content, so the overlay has
		// something to copy up, white out and make opaque.
		rng := rand.New(rand.NewSource(seed))
		for i := 0; i < 10; i++ {
			b := make([]byte, rng.Intn(5000))
			rng.Read(b)
			writeFile(t, filepath.Join(native, fmt.Sprintf("b%d/f%d", i%3, i)), string(b))
		}
		os.Link(filepath.Join(native, "b0/f0"), filepath.Join(native, "b1/hard"))
		os.Symlink("f0", filepath.Join(native, "b0/sym"))
		l, err := s.Import(context.Background(), native, ImportOptions{Message: "base"})
		if err != nil {
			t.Fatal(err)
		}
		// Copy most files up lazily, so that the model covers it.
		defer func(v int64) { lazyMinSize = v }(lazyMinSize)
		lazyMinSize = 1024
		m := &modelRun{t: t, rng: rng, native: native, s: s, transport: tr}
		if seed%2 == 0 {
			m.overlay = tmpfsDir(t) // even seeds keep the overlay on a tmpfs
		}
		m.ws = mountWSOpts(t, s, MountOptions{Layer: l, OverlayDir: m.overlay, Transport: tr})
		t.Cleanup(func() {
			if !m.ws.closed {
				m.ws.Unmount(5 * time.Second)
			}
		})
		m.compare("at start")
		for i := 0; i < ops; i++ {
			m.step()
		}
		lazy := m.ws.tel.lazyCopyUps.Load()
		m.remount()
		t.Logf("seed %d: %d ops, %d commits, %d lazy copy-ups in the last mount", seed, len(m.log), m.commits, lazy)
	})
}

func newSHA() interface {
	Write([]byte) (int, error)
	Sum([]byte) []byte
} {
	return sha256.New()
}
