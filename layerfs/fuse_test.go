//go:build linux

package layerfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
	"github.com/sealbench/sealbench/layerfs/uring"
	"github.com/sealbench/sealbench/manifests"
	"golang.org/x/sys/unix"
)

func needFUSE(t testing.TB) {
	t.Helper()
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
}

// mountWS mounts a Workspace of l (nil: the Store's newest Layer) over
// /dev/fuse and unmounts it when the test ends.
func mountWS(t testing.TB, s *Store, l *Layer) *Workspace {
	t.Helper()
	return mountWSOpts(t, s, MountOptions{Layer: l})
}

// mountWSOpts is mountWS with options; an empty Transport is uring.Dev, not
// Auto: a test names the transport it wants, whatever enable_uring is.
func mountWSOpts(t testing.TB, s *Store, opts MountOptions) *Workspace {
	t.Helper()
	if opts.Transport == "" {
		opts.Transport = uring.Dev
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := Mount(context.Background(), s, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ws.mu.Lock()
		closed := ws.closed
		ws.mu.Unlock()
		if !closed {
			if _, err := ws.Unmount(5 * time.Second); err != nil {
				t.Errorf("unmount: %v", err)
			}
		}
	})
	return ws
}

// mountLoopback mounts go-fuse's loopback filesystem of dir at mnt with the
// Workspace's kernel settings, over /dev/fuse, counting requests as a
// Workspace does.
func mountLoopback(tb testing.TB, dir, mnt string) (unmount func(), tel *telemetry) {
	tb.Helper()
	return mountLoopbackOver(tb, dir, mnt, uring.Dev)
}

// mountLoopbackOver is mountLoopback over the transport tr.
func mountLoopbackOver(tb testing.TB, dir, mnt string, tr uring.Transport) (unmount func(), tel *telemetry) {
	tb.Helper()
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	fopts, _ := kernelOptions(MountOptions{})
	fopts.FsName, fopts.Name = "loopback", "loopback"
	tel = &telemetry{}
	server, err := uring.Mount(mnt, &countingFS{RawFileSystem: fs.NewNodeFS(root, fopts), t: tel}, &fopts.MountOptions, uring.Options{Transport: tr})
	if err != nil {
		tb.Fatal(err)
	}
	return func() {
		if err := server.Unmount(); err != nil {
			tb.Errorf("unmounting the loopback at %s: %v", mnt, err)
		}
	}, tel
}

// tmpfsDir returns a fresh directory on a tmpfs, for an overlay there.
func tmpfsDir(t testing.TB) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		testenv.Skip(t, "needs a tmpfs at /dev/shm (%v)", err)
	}
	d, err := os.MkdirTemp("/dev/shm", "layerfs-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestPosix(t *testing.T) {
	needFUSE(t)
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	forTransports(t, func(t *testing.T, tr uring.Transport) {
		for _, overlay := range []string{"disk", "tmpfs"} {
			t.Run(overlay, func(t *testing.T) {
				for _, name := range names {
					t.Run(name, func(t *testing.T) {
						s := newStore(t, ProfileDisposable)
						opts := MountOptions{Transport: tr}
						if overlay == "tmpfs" {
							opts.OverlayDir = tmpfsDir(t)
						}
						ws := mountWSOpts(t, s, opts)
						posixtest.All[name](t, ws.Mountpoint())
					})
				}
			})
		}
	})
}

func TestPassthroughInUse(t *testing.T) {
	needFUSE(t)
	forTransports(t, func(t *testing.T, tr uring.Transport) {
		s := newStore(t, ProfileDisposable)
		src := t.TempDir()
		writeFile(t, filepath.Join(src, "base"), strings.Repeat("b", 1<<20))
		l, err := s.Import(context.Background(), src, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ws := mountWSOpts(t, s, MountOptions{Layer: l, Transport: tr})
		if !ws.features.Passthrough {
			testenv.Skip(t, "kernel did not grant FUSE passthrough")
		}
		if _, err := os.ReadFile(filepath.Join(ws.Mountpoint(), "base")); err != nil {
			t.Fatal(err)
		}
		st := writeReadBack(t, ws)
		if st.Requests["READ"].Count != 0 || st.Requests["WRITE"].Count != 0 {
			t.Errorf("with passthrough no READ or WRITE should reach the daemon: %+v", st.Requests)
		}
		if st.Features.Transport != string(tr) {
			t.Errorf("served over %q (%s), want %s", st.Features.Transport, st.Features.TransportReason, tr)
		}
		if tr == uring.URing && (st.TransportStats.RingRequests == 0 || len(st.TransportStats.Queues) == 0) {
			t.Errorf("over io_uring, no request came on the rings: %+v", st.TransportStats)
		}
	})
}

// writeReadBack writes a new 1 MiB file in ws and reads it back, and returns
// the telemetry after: with passthrough, no READ or WRITE reaches the daemon.
func writeReadBack(t *testing.T, ws *Workspace) *Stats {
	t.Helper()
	writeFile(t, filepath.Join(ws.Mountpoint(), "new"), strings.Repeat("n", 1<<20))
	if b, err := os.ReadFile(filepath.Join(ws.Mountpoint(), "new")); err != nil || len(b) != 1<<20 {
		t.Fatalf("read back: %d %v", len(b), err)
	}
	st, err := ws.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPassthroughFromOverlayfs: a Store on a stacked filesystem (an
// overlayfs, as a container's root is) still gets passthrough, so no READ
// reaches the daemon. At go-fuse's default stack depth the kernel refused
// such backing files and every Sandbox read went through the daemon.
func TestPassthroughFromOverlayfs(t *testing.T) {
	needFUSE(t)
	d := t.TempDir()
	for _, sub := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(d, "merged")
	opts := "lowerdir=" + filepath.Join(d, "lower") + ",upperdir=" + filepath.Join(d, "upper") + ",workdir=" + filepath.Join(d, "work")
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		testenv.Skip(t, "cannot mount an overlayfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	s, err := Init(context.Background(), filepath.Join(merged, "store"), ProfileDisposable)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "base"), strings.Repeat("b", 4<<20))
	l, err := s.Import(context.Background(), src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(merged, "overlay"), 0o700); err != nil {
		t.Fatal(err)
	}
	ws := mountWSOpts(t, s, MountOptions{Layer: l, OverlayDir: filepath.Join(merged, "overlay")})
	if !ws.features.Passthrough {
		testenv.Skip(t, "kernel did not grant FUSE passthrough")
	}
	if b, err := os.ReadFile(filepath.Join(ws.Mountpoint(), "base")); err != nil || len(b) != 4<<20 {
		t.Fatalf("read: %d %v", len(b), err)
	}
	st := writeReadBack(t, ws)
	if n := st.Requests["READ"].Count + st.Requests["WRITE"].Count; n != 0 {
		t.Errorf("a Store on overlayfs: %d READ and WRITE requests reached the daemon, want 0 with passthrough", n)
	}
}

// TestOverlay checks copy-up, whiteouts, opaque directories and that the
// base Layer never changes.
func TestOverlay(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), "base f")
	writeFile(t, filepath.Join(src, "d/x"), "base x")
	writeFile(t, filepath.Join(src, "d/sub/y"), "base y")
	writeFile(t, filepath.Join(src, "keep/z"), "base z")
	os.Link(filepath.Join(src, "f"), filepath.Join(src, "keep/f2"))
	l, err := s.Import(ctx, src, ImportOptions{Message: "base"})
	if err != nil {
		t.Fatal(err)
	}
	ws := mountWS(t, s, l)
	m := ws.Mountpoint()
	// Copy-up on write; the other name of the hard link sees it.
	fh, err := os.OpenFile(filepath.Join(m, "f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(" more")
	fh.Close()
	if b, _ := os.ReadFile(filepath.Join(m, "keep/f2")); string(b) != "base f more" {
		t.Errorf("hard link after copy-up: %q", b)
	}
	// Whiteout, then opaque directory.
	if err := os.RemoveAll(filepath.Join(m, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(m, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(m, "d")); len(ents) != 0 {
		t.Errorf("opaque directory shows %v", ents)
	}
	// Rename a base directory over an existing empty one.
	if err := os.Mkdir(filepath.Join(m, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rename(filepath.Join(m, "keep"), filepath.Join(m, "empty")); err != nil { // os.Rename refuses directories
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(m, "empty/z")); string(b) != "base z" {
		t.Errorf("renamed dir: %q", b)
	}
	res, err := ws.Commit(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate {
		t.Fatal("commit after changes says UpToDate")
	}
	res2, err := ws.Commit(ctx, "third")
	if err != nil || !res2.UpToDate {
		t.Fatalf("second commit: %+v %v", res2, err)
	}
	changes, err := s.Diff(ctx, l, res.Layer)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]daemonapi.ChangeKind{}
	for _, c := range changes {
		got[c.Path] = c.Kind
	}
	for p, k := range map[string]daemonapi.ChangeKind{"/f": daemonapi.Modified, "/d/x": daemonapi.Deleted, "/d/sub": daemonapi.Deleted, "/keep": daemonapi.Deleted, "/empty/z": daemonapi.Added} {
		if got[p] != k {
			t.Errorf("diff %s: got %q want %q (all: %v)", p, got[p], k, changes)
		}
	}
	// The base Layer is unchanged: a second workspace of it shows it.
	ws2 := mountWS(t, s, l)
	if b, _ := os.ReadFile(filepath.Join(ws2.Mountpoint(), "f")); string(b) != "base f" {
		t.Errorf("base layer changed: f = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws2.Mountpoint(), "d/sub/y")); string(b) != "base y" {
		t.Errorf("base layer changed: d/sub/y = %q", b)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws2.Mountpoint(), "keep/f2"), &st); err != nil || st.Nlink != 2 {
		t.Errorf("hard link in base: nlink %d, %v", st.Nlink, err)
	}
	// The new Layer, remounted, shows the changes.
	ws3 := mountWS(t, s, res.Layer)
	if b, _ := os.ReadFile(filepath.Join(ws3.Mountpoint(), "empty/f2")); string(b) != "base f more" {
		t.Errorf("new layer: empty/f2 = %q", b)
	}
	if err := syscall.Stat(filepath.Join(ws3.Mountpoint(), "empty/f2"), &st); err != nil || st.Nlink != 2 {
		t.Errorf("hard link in new layer: nlink %d, %v", st.Nlink, err)
	}
}

// TestExactMetadata imports a tree with unusual metadata and checks that a
// Workspace of it reports every field exactly, and that a commit keeps them.
func TestExactMetadata(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "suid"), "x")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chown(filepath.Join(src, "suid"), 1234, 5678))
	must(os.Chmod(filepath.Join(src, "suid"), 0o4751))
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o640))
	must(syscall.Mknod(filepath.Join(src, "null"), syscall.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	must(os.Symlink("suid", filepath.Join(src, "link")))
	must(os.Mkdir(filepath.Join(src, "dir"), 0o2750))
	must(unix.Setxattr(filepath.Join(src, "suid"), "user.k", []byte("v"), 0))
	for i, name := range []string{"suid", "fifo", "null", "link", "dir", "."} {
		ts := []unix.Timespec{{Sec: 1e9 + int64(i), Nsec: 123456789}, {Sec: 2e9 + int64(i), Nsec: 987654321}}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(src, name), ts, unix.AT_SYMLINK_NOFOLLOW))
	}
	s := newStore(t, ProfileFast)
	l, err := s.Import(ctx, src, ImportOptions{})
	must(err)
	check := func(ws *Workspace) {
		t.Helper()
		for i, name := range []string{"suid", "fifo", "null", "link", "dir", "."} {
			var a, b unix.Stat_t
			must(unix.Lstat(filepath.Join(src, name), &a))
			must(unix.Lstat(filepath.Join(ws.Mountpoint(), name), &b))
			// Importing reads the source, which may move its atime; the
			// Layer keeps the atime from before.
			a.Atim = unix.Timespec{Sec: 1e9 + int64(i), Nsec: 123456789}
			if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid || a.Rdev != b.Rdev || a.Mtim != b.Mtim || a.Atim != b.Atim || a.Ctim != b.Ctim ||
				(a.Mode&syscall.S_IFMT != syscall.S_IFDIR && a.Size != b.Size) {
				t.Errorf("%s: source %+v\nworkspace %+v", name, a, b)
			}
		}
		buf := make([]byte, 10)
		n, err := unix.Getxattr(filepath.Join(ws.Mountpoint(), "suid"), "user.k", buf)
		if err != nil || string(buf[:n]) != "v" {
			t.Errorf("xattr: %q %v", buf[:n], err)
		}
	}
	ws := mountWS(t, s, l)
	check(ws)
	// A metadata-only change (owner and mode of the directory) commits and
	// survives a remount, the rest untouched.
	must(os.Chown(filepath.Join(ws.Mountpoint(), "dir"), 42, 43))
	must(os.Chown(filepath.Join(src, "dir"), 42, 43))
	res, err := ws.Commit(ctx, "chown")
	must(err)
	ws2 := mountWS(t, s, res.Layer)
	var a, b unix.Stat_t
	must(unix.Lstat(filepath.Join(ws2.Mountpoint(), "dir"), &b))
	must(unix.Lstat(filepath.Join(src, "dir"), &a))
	if b.Uid != 42 || b.Gid != 43 || a.Mode != b.Mode || a.Mtim != b.Mtim {
		t.Errorf("after commit: dir %+v, want owner 42:43, mode %o, mtime %v", b, a.Mode, a.Mtim)
	}
}

// TestCopyUpWhileReading: a base file being read cannot be copied up (the
// kernel allows one backing file per inode), so writing it answers ETXTBSY
// until the reader closes; a reader that just closed does not block it.
func TestCopyUpWhileReading(t *testing.T) {
	needFUSE(t)
	s := newStore(t, ProfileDisposable)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), "base")
	l, err := s.Import(context.Background(), src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ws := mountWS(t, s, l)
	p := filepath.Join(ws.Mountpoint(), "f")
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.OpenFile(p, os.O_WRONLY, 0); !errors.Is(err, syscall.ETXTBSY) {
		t.Errorf("write-open while a reader is open: got %v, want ETXTBSY", err)
	}
	r.Close()
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(p); err != nil || string(b) != "base" {
			t.Fatalf("read: %q %v", b, err)
		}
		if err := os.WriteFile(p, []byte("new"+strings.Repeat("!", i)), 0o644); err != nil {
			t.Fatalf("write right after a read (round %d): %v", i, err)
		}
		if err := os.WriteFile(p, []byte("base"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCommitOpenFile commits while a file is open for writing: the Layer
// gets what was written so far, later writes go to the next Commit.
func TestCommitOpenFile(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	ws := mountWS(t, s, nil)
	p := filepath.Join(ws.Mountpoint(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("one")
	r1, err := ws.Commit(ctx, "while open")
	if err != nil || r1.UpToDate {
		t.Fatalf("commit: %+v %v", r1, err)
	}
	f.WriteString(" two")
	f.Close()
	r2, err := ws.Commit(ctx, "after close")
	if err != nil || r2.UpToDate {
		t.Fatalf("commit after close: %+v %v", r2, err)
	}
	// Unchanged since: UpToDate, however often.
	for i := 0; i < 3; i++ {
		if r, err := ws.Commit(ctx, "again"); err != nil || !r.UpToDate {
			t.Fatalf("commit %d: %+v %v", i, r, err)
		}
	}
	for l, want := range map[*Layer]string{r1.Layer: "one", r2.Layer: "one two"} {
		w := mountWS(t, s, l)
		if b, err := os.ReadFile(filepath.Join(w.Mountpoint(), "f")); err != nil || string(b) != want {
			t.Errorf("layer %s: f = %q (%v), want %q", l.ID.Short(), b, err, want)
		}
	}
}

// TestLazyCopyUp: write-only opens of a large base file copy it up lazily;
// whatever was not written still reads as the base, from the writer's
// close on, and while it writes, for any other reader.
func TestLazyCopyUp(t *testing.T) {
	needFUSE(t)
	t.Run("disk", func(t *testing.T) { testLazyCopyUp(t, "") })
	t.Run("tmpfs", func(t *testing.T) { testLazyCopyUp(t, tmpfsDir(t)) })
}

func testLazyCopyUp(t *testing.T, overlayDir string) {
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	src := t.TempDir()
	base := pattern(3<<20, 7)
	for _, name := range []string{"a", "b", "c", "d"} {
		writeFile(t, filepath.Join(src, name), string(base))
	}
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ws := mountWSOpts(t, s, MountOptions{Layer: l, OverlayDir: overlayDir})
	m := ws.Mountpoint()
	want := map[string][]byte{}
	// e: cp(1) of a base file (copy_file_range, across filesystems when
	// the overlay is on a tmpfs).
	runBody(t, m, "cp a e")
	want["e"] = append([]byte(nil), base...)
	patch := func(name string, off int, data string) {
		if want[name] == nil {
			want[name] = append([]byte(nil), base...)
		}
		w := want[name]
		if off+len(data) > len(w) {
			w = append(w, make([]byte, off+len(data)-len(w))...)
		}
		copy(w[off:], data)
		want[name] = w
	}
	// a: a small write in the middle, unaligned.
	f, err := os.OpenFile(filepath.Join(m, "a"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 1<<20+3); err != nil {
		t.Fatal(err)
	}
	patch("a", 1<<20+3, "hello")
	// b: read while a writer is open, then append past the end.
	g, err := os.OpenFile(filepath.Join(m, "b"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString("tail")
	patch("b", len(base), "tail")
	if got, err := os.ReadFile(filepath.Join(m, "b")); err != nil || !bytes.Equal(got, want["b"]) {
		t.Errorf("b read while its writer is open: %d bytes, %v", len(got), err)
	}
	g.WriteString("more")
	patch("b", len(base)+4, "more")
	g.Close()
	f.Close()
	// c: dd-style overwrite of the first half, in 1 MiB blocks.
	runBody(t, m, `dd if=/dev/zero of=c bs=1M count=1 conv=notrunc 2>/dev/null`)
	patch("c", 0, string(make([]byte, 1<<20)))
	// d: a commit while its writer is open.
	h, err := os.OpenFile(filepath.Join(m, "d"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt([]byte("x"), 5)
	patch("d", 5, "x")
	res, err := ws.Commit(ctx, "lazy")
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	check := func(root string) {
		t.Helper()
		for name, w := range want {
			got, err := os.ReadFile(filepath.Join(root, name))
			if err != nil || !bytes.Equal(got, w) {
				i := 0
				for i < len(got) && i < len(w) && got[i] == w[i] {
					i++
				}
				t.Errorf("%s: %d bytes (want %d), first difference at %d, %v", name, len(got), len(w), i, err)
			}
		}
	}
	check(m)
	check(mountWS(t, s, res.Layer).Mountpoint())
	if st, err := os.Stat(filepath.Join(m, "c")); err != nil || st.Size() != int64(len(base)) {
		t.Errorf("c size: %v %v", st, err)
	}
}

// pattern is n bytes, byte i being i*mul.
func pattern(n, mul int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * mul)
	}
	return b
}

// TestWriteBehind: large writes into a lazily copied-up file are answered
// before they reach its data file, and nothing can tell: a stat, another
// open, a Commit and the close each see every byte answered; a write done
// behind that fails is the next fsync's error, once, as a write-back error
// is, and never a later write's (which the kernel may turn into a short
// count that the caller retries, losing the error).
func TestWriteBehind(t *testing.T) {
	forTransports(t, func(t *testing.T, tr uring.Transport) {
		ctx := context.Background()
		s := newStore(t, ProfileFast)
		src := t.TempDir()
		base := pattern(8<<20, 13)
		writeFile(t, filepath.Join(src, "big"), string(base))
		l, err := s.Import(ctx, src, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ws := mountWSOpts(t, s, MountOptions{Layer: l, OverlayDir: tmpfsDir(t), Transport: tr})
		p := filepath.Join(ws.Mountpoint(), "big")
		want := append([]byte(nil), base...)
		block := func(c byte) []byte { return bytes.Repeat([]byte{c}, 1<<20) }
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := 0; i < 3; i++ {
			if _, err := f.WriteAt(block('a'+byte(i)), int64(i)<<20); err != nil {
				t.Fatal(err)
			}
			copy(want[i<<20:], block('a'+byte(i)))
		}
		st, err := ws.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.WritesBehind != 3 {
			t.Errorf("%d writes done behind, want 3", st.WritesBehind)
		}
		// Straight after the last write, with the writer still open.
		if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(base)) {
			t.Errorf("stat while written behind: %v %v", fi, err)
		}
		res, err := ws.Commit(ctx, "written behind")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("read while its writer is open: %d bytes, %v, equal %v", len(got), err, bytes.Equal(got, want))
		}
		w := mountWSOpts(t, s, MountOptions{Layer: res.Layer, Transport: tr})
		if got, err := os.ReadFile(filepath.Join(w.Mountpoint(), "big")); err != nil || !bytes.Equal(got, want) {
			t.Errorf("the Commit's Layer: %d bytes, %v, equal %v", len(got), err, bytes.Equal(got, want))
		}

		// A failed write behind: the writes after it succeed, the next fsync
		// says EIO (it waits for the writes behind), the one after that
		// nothing (the error is answered once).
		g, err := os.OpenFile(filepath.Join(w.Mountpoint(), "big"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		fault := func(off int64) error {
			if off == 1<<20 {
				return syscall.EIO
			}
			return nil
		}
		writeBehindFault.Store(&fault)
		defer writeBehindFault.Store(nil)
		for i, c := range []byte{'x', 'y', 'z'} {
			if _, err := g.WriteAt(block(c), int64(1+i)<<20); err != nil {
				t.Errorf("write %d after the one that fails behind: %v, want it to succeed (the error is fsync's)", i, err)
			}
		}
		if err := g.Sync(); !errors.Is(err, syscall.EIO) {
			t.Errorf("fsync after a write that failed behind: %v, want EIO", err)
		}
		if err := g.Sync(); err != nil {
			t.Errorf("the fsync after that: %v, want nil (the error is answered once)", err)
		}
	})
}

// TestLoadDirIgnoresInterrupts: a directory load survives its request
// being interrupted (the kernel sends FUSE_INTERRUPT when the caller gets
// any signal; go-fuse then cancels the request's context). It failed the
// lookup with EIO under load.
func TestLoadDirIgnoresInterrupts(t *testing.T) {
	needFUSE(t)
	s := newStore(t, ProfileDisposable)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "d", "f"), "x")
	l, err := s.Import(context.Background(), src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ws := mountWS(t, s, l)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as go-fuse does on FUSE_INTERRUPT
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := ws.loadDir(ctx, ws.root); e != 0 {
		t.Fatalf("loading / with an interrupted request: %v", e)
	}
	d := ws.root.children["d"]
	if d == nil || d.children != nil {
		t.Fatalf("d: %+v (want an unloaded directory)", d)
	}
	if e := ws.loadDir(ctx, d); e != 0 || d.children["f"] == nil {
		t.Fatalf("loading d with an interrupted request: %v, children %v", e, d.children)
	}
}

// TestOverlayUsageCountsWhatTheWorkspaceShows: a file unlinked while open
// keeps its data file until its last RELEASE (the kernel's timing), and an
// unlinked file's data goes in the background; neither counts, so the same
// work always gives the same overlay counts.
func TestOverlayUsageCountsWhatTheWorkspaceShows(t *testing.T) {
	needFUSE(t)
	s := newStore(t, ProfileDisposable)
	ws := mountWS(t, s, nil)
	writeFile(t, filepath.Join(ws.Mountpoint(), "kept"), "12345")
	writeFile(t, filepath.Join(ws.Mountpoint(), "dir", "also"), "678")
	if err := os.Link(filepath.Join(ws.Mountpoint(), "kept"), filepath.Join(ws.Mountpoint(), "dir", "kept-too")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws.Mountpoint(), "gone"), strings.Repeat("x", 4096))
	f, err := os.Open(filepath.Join(ws.Mountpoint(), "gone"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(filepath.Join(ws.Mountpoint(), "gone")); err != nil {
		t.Fatal(err)
	}
	st, err := ws.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.OverlayFiles != 2 || st.OverlayBytes != 8 {
		t.Errorf("overlay: %d files, %d bytes; want 2 files (a hard link counted once), 8 bytes (not the open, unlinked one)", st.OverlayFiles, st.OverlayBytes)
	}
}

// TestNoMoreRequestsThanLoopback creates, writes and closes files through
// a Workspace and through go-fuse's loopback filesystem mounted with the
// same kernel settings, and checks that the Workspace needs no more FUSE
// requests for them than the loopback does (the kernel's housekeeping, sent
// on its own time, left out), only one LOOKUP and one CREATE per file, and
// no more than five requests per file in all.
func TestNoMoreRequestsThanLoopback(t *testing.T) {
	needFUSE(t)
	const files = 50
	work := func(dir string) {
		for i := 0; i < files; i++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte("file\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	work(t.TempDir()) // the test binary's own first-use costs, out of the way

	ws := mountWS(t, newStore(t, ProfileDisposable), nil)
	work(ws.mountpoint)
	if _, err := ws.Unmount(5 * time.Second); err != nil { // every RELEASE answered
		t.Fatal(err)
	}
	layerfs, _ := ws.tel.snapshot()

	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	unmount, tel := mountLoopback(t, t.TempDir(), mnt)
	work(mnt)
	unmount()
	loopback, _ := tel.snapshot()

	counts := func(ops map[string]OpStats) (map[string]int64, int64) {
		m, n := map[string]int64{}, int64(0)
		for op, s := range ops {
			if !manifests.KernelHousekeeping(op) {
				m[op] = s.Count
				n += s.Count
			}
		}
		return m, n
	}
	got, gotN := counts(layerfs)
	want, wantN := counts(loopback)
	t.Logf("requests for %d files: layerfs %d %v, loopback %d %v", files, gotN, got, wantN, want)
	if gotN > wantN {
		t.Errorf("layerfs needs %d requests for %d files, go-fuse's loopback %d", gotN, files, wantN)
	}
	if got["CREATE"] != files || got["LOOKUP"] > files {
		t.Errorf("layerfs: %d CREATE and %d LOOKUP for %d new files", got["CREATE"], got["LOOKUP"], files)
	}
	// Five per file is what this kernel needs (see doc.go, Kernel
	// features): LOOKUP, CREATE, GETXATTR(security.capability) before the
	// first write, the parent's GETATTR for default_permissions, RELEASE;
	// plus the one FLUSH that tells the kernel to send no more, and the
	// root's first GETATTR.
	if gotN > 5*files+2 {
		t.Errorf("layerfs needs %d requests for %d files, more than five a file", gotN, files)
	}
}

// loopFS mounts a fresh filesystem of type fsys (xfs, with reflinks, or
// ext4, without) from a loop-mounted image and returns its root; it is
// unmounted when the test ends.
func loopFS(t testing.TB, fsys string) string {
	t.Helper()
	testenv.NeedRoot(t)
	mkfs := testenv.NeedCommand(t, "mkfs."+fsys)
	args := map[string][]string{"xfs": {"-q", "-m", "reflink=1"}, "ext4": {"-q", "-F"}}[fsys]
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(512 << 20) // sparse
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, append(args, img)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", mkfs, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		testenv.Skip(t, "cannot loop-mount a %s image here: %v: %s", fsys, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		// A Workspace on it is unmounted by then, but the kernel lets go
		// of the passthrough files it held there only when the FUSE
		// connection is freed, a moment later: busy for that moment.
		var out []byte
		var err error
		for try := 0; try < 50; try++ {
			if out, err = exec.Command("umount", mnt).CombinedOutput(); err == nil || !bytes.Contains(out, []byte("busy")) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	return mnt
}

// TestCopyUpClonesWhereItCan opens a large base file write-only on a Store on
// XFS: the copy-up shares the blob's extents (FICLONE) at once, so the
// writes go by passthrough (no WRITE reaches the daemon) instead of lazily
// through it, and the base Layer's blob is unchanged. On ext4, which has no
// reflinks, the same open copies up lazily.
func TestCopyUpClonesWhereItCan(t *testing.T) {
	needFUSE(t)
	for _, fsys := range []string{"xfs", "ext4"} {
		t.Run(fsys, func(t *testing.T) {
			root := loopFS(t, fsys)
			src := filepath.Join(root, "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			base := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16) // 4 MiB
			if err := os.WriteFile(filepath.Join(src, "base.bin"), base, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			s, err := Init(ctx, filepath.Join(root, "store"), ProfileDisposable)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l, err := s.Import(ctx, src, ImportOptions{Message: "base"})
			if err != nil {
				t.Fatal(err)
			}
			ws := mountWSOpts(t, s, MountOptions{Layer: l})
			p := filepath.Join(ws.mountpoint, "base.bin")
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(bytes.Repeat([]byte{'x'}, 1<<20), 1<<20); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			want := append([]byte(nil), base...)
			copy(want[1<<20:2<<20], bytes.Repeat([]byte{'x'}, 1<<20))
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("after writing its second MiB, the file differs (err %v)", err)
			}
			st, err := ws.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			writes := st.Requests["WRITE"].Count + st.Requests["WRITEV"].Count
			t.Logf("%s: %d copy-ups, %d cloned, %d lazy, %d bytes copied, %d WRITE requests",
				fsys, st.CopyUps, st.ClonedCopyUps, st.LazyCopyUps, st.CopyUpBytes, writes)
			switch {
			case fsys == "xfs" && (st.ClonedCopyUps != 1 || st.LazyCopyUps != 0 || writes != 0 || st.CopyUpBytes != 0):
				t.Errorf("on XFS the copy-up should be one clone, with the writes by passthrough")
			case fsys == "ext4" && (st.ClonedCopyUps != 0 || st.LazyCopyUps != 1 || writes == 0):
				t.Errorf("on ext4 the copy-up should be lazy, with the writes through the daemon")
			}
			// The base Layer still reads as it was.
			ents, err := s.loadTree(ctx, l.Root.Content)
			if err != nil || len(ents) != 1 {
				t.Fatalf("base layer: %v %v", ents, err)
			}
			blob, err := os.ReadFile(s.blobPath(ents[0].Content))
			if err != nil || !bytes.Equal(blob, base) {
				t.Errorf("the base blob changed (err %v)", err)
			}
		})
	}
}
