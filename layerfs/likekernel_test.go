//go:build linux

package layerfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// outcome is how a call ended, as the comparison tests print it.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// compareWithKernel runs n cases on a plain directory (the kernel's own
// answer) and on a Workspace, each through result(dir, i), and reports
// every case, named by name(i), whose outcome differs. It returns the
// plain directory's outcomes, so that a test can check that its cases
// exercise what they mean to.
func compareWithKernel(t *testing.T, plain, ws string, n int, name func(i int) string, result func(dir string, i int) string) []string {
	t.Helper()
	want := make([]string, n)
	for i := range want {
		want[i] = result(plain, i)
		if got := result(ws, i); got != want[i] {
			t.Errorf("%s: workspace %s; the kernel on a plain directory %s", name(i), got, want[i])
		}
	}
	return want
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestLongNamesLikeTheKernel calls everything that takes a path with a
// name component of 256 bytes (one more than NAME_MAX), and of 255, on a
// plain directory and on a Workspace, each case in a fresh directory, and
// checks that the Workspace answers as the kernel's own filesystem does:
// ENAMETOOLONG for the long one, wherever it is in the path.
func TestLongNamesLikeTheKernel(t *testing.T) {
	needFUSE(t)
	plain := t.TempDir()
	ws := mountWS(t, newStore(t, ProfileDisposable), nil)
	long, max := strings.Repeat("L", 256), strings.Repeat("m", 255)
	create := func(p string) error {
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	// Each case runs in a directory holding a file f, a directory d and a
	// symlink s to the long name.
	cases := map[string]func(dir string, name func(string) string) error{
		"lookup":        func(d string, p func(string) string) error { return unix.Lstat(p(long), new(unix.Stat_t)) },
		"lookup below":  func(d string, p func(string) string) error { return unix.Lstat(p(long+"/f"), new(unix.Stat_t)) },
		"stat symlink":  func(d string, p func(string) string) error { return unix.Stat(p("s"), new(unix.Stat_t)) },
		"access":        func(d string, p func(string) string) error { return unix.Access(p(long), unix.F_OK) },
		"open":          func(d string, p func(string) string) error { return create(p(long)) },
		"open read":     func(d string, p func(string) string) error { _, err := os.Open(p(long)); return err },
		"open excl":     func(d string, p func(string) string) error { return excl(p(long)) },
		"create below":  func(d string, p func(string) string) error { return create(p(long + "/x")) },
		"mkdir":         func(d string, p func(string) string) error { return unix.Mkdir(p(long), 0o755) },
		"mkdir below":   func(d string, p func(string) string) error { return unix.Mkdir(p("d/"+long), 0o755) },
		"mknod":         func(d string, p func(string) string) error { return unix.Mknod(p(long), unix.S_IFREG|0o644, 0) },
		"mkfifo":        func(d string, p func(string) string) error { return unix.Mkfifo(p(long), 0o644) },
		"symlink":       func(d string, p func(string) string) error { return unix.Symlink("f", p(long)) },
		"link":          func(d string, p func(string) string) error { return unix.Link(p("f"), p(long)) },
		"link from":     func(d string, p func(string) string) error { return unix.Link(p(long), p("g")) },
		"rename from":   func(d string, p func(string) string) error { return unix.Rename(p(long), p("g")) },
		"rename to":     func(d string, p func(string) string) error { return unix.Rename(p("f"), p(long)) },
		"rename dir to": func(d string, p func(string) string) error { return unix.Rename(p("d"), p(long)) },
		"rename into":   func(d string, p func(string) string) error { return unix.Rename(p("f"), p("d/"+long)) },
		"exchange to": func(d string, p func(string) string) error {
			return unix.Renameat2(unix.AT_FDCWD, p("f"), unix.AT_FDCWD, p(long), unix.RENAME_EXCHANGE)
		},
		"noreplace to": func(d string, p func(string) string) error {
			return unix.Renameat2(unix.AT_FDCWD, p("f"), unix.AT_FDCWD, p(long), unix.RENAME_NOREPLACE)
		},
		"unlink":         func(d string, p func(string) string) error { return unix.Unlink(p(long)) },
		"rmdir":          func(d string, p func(string) string) error { return unix.Rmdir(p(long)) },
		"truncate":       func(d string, p func(string) string) error { return unix.Truncate(p(long), 0) },
		"chmod":          func(d string, p func(string) string) error { return unix.Chmod(p(long), 0o600) },
		"chown":          func(d string, p func(string) string) error { return unix.Lchown(p(long), 0, 0) },
		"utimes":         func(d string, p func(string) string) error { return unix.UtimesNano(p(long), make([]unix.Timespec, 2)) },
		"readlink":       func(d string, p func(string) string) error { _, err := os.Readlink(p(long)); return err },
		"setxattr":       func(d string, p func(string) string) error { return unix.Setxattr(p(long), "user.x", []byte("1"), 0) },
		"max open":       func(d string, p func(string) string) error { return create(p(max)) },
		"max mkdir":      func(d string, p func(string) string) error { return unix.Mkdir(p(max), 0o755) },
		"max symlink":    func(d string, p func(string) string) error { return unix.Symlink("f", p(max)) },
		"max link":       func(d string, p func(string) string) error { return unix.Link(p("f"), p(max)) },
		"max rename":     func(d string, p func(string) string) error { return unix.Rename(p("f"), p(max)) },
		"max mknod fifo": func(d string, p func(string) string) error { return unix.Mkfifo(p(max), 0o644) },
		"max lookup":     func(d string, p func(string) string) error { return unix.Lstat(p(max), new(unix.Stat_t)) },
	}
	result := func(root, name string, fn func(string, func(string) string) error) string {
		dir := filepath.Join(root, strings.ReplaceAll(name, " ", "-"))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte("f\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(long, filepath.Join(dir, "s")); err != nil {
			t.Fatal(err)
		}
		got := outcome(fn(dir, func(rel string) string { return filepath.Join(dir, rel) }))
		names, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var listing []string
		for _, e := range names {
			n := e.Name()
			if len(n) > 20 {
				n = fmt.Sprintf("%c×%d", n[0], len(n))
			}
			listing = append(listing, n)
		}
		return fmt.Sprintf("%s, then %v", got, listing)
	}
	names := sortedKeys(cases)
	want := compareWithKernel(t, plain, ws.mountpoint, len(names), func(i int) string { return names[i] },
		func(dir string, i int) string { return result(dir, names[i], cases[names[i]]) })
	tooLong := 0
	for _, w := range want {
		if strings.HasPrefix(w, "ENAMETOOLONG") {
			tooLong++
		}
	}
	if tooLong < len(cases)-8 {
		t.Errorf("only %d of %d cases failed with ENAMETOOLONG on the plain directory", tooLong, len(cases))
	}
}

func excl(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}

// TestLinkCtimeLikeTheKernel links, unlinks and renames names of a file
// that has other hard links, on a plain directory and on a Workspace, and
// checks that the remaining names (one inode) show a new ctime on the
// Workspace exactly when they do on the plain directory.
func TestLinkCtimeLikeTheKernel(t *testing.T) {
	needFUSE(t)
	plain := t.TempDir()
	ws := mountWS(t, newStore(t, ProfileDisposable), nil)
	// Each case starts with a and b, two names of one file, a file x, and
	// a directory d; it changes something and then b is looked at.
	cases := map[string]func(p func(string) string) error{
		"unlink a":         func(p func(string) string) error { return unix.Unlink(p("a")) },
		"link a to c":      func(p func(string) string) error { return unix.Link(p("a"), p("c")) },
		"rename a to c":    func(p func(string) string) error { return unix.Rename(p("a"), p("c")) },
		"rename a into d":  func(p func(string) string) error { return unix.Rename(p("a"), p("d/a")) },
		"rename x over a":  func(p func(string) string) error { return unix.Rename(p("x"), p("a")) },
		"exchange a and x": func(p func(string) string) error { return exchange(p("a"), p("x")) },
		"rename a over b":  func(p func(string) string) error { return unix.Rename(p("a"), p("b")) },
		"unlink x":         func(p func(string) string) error { return unix.Unlink(p("x")) },
		"link x to c":      func(p func(string) string) error { return unix.Link(p("x"), p("c")) },
		"unlink a, b open": func(p func(string) string) error {
			return withOpen(p("b"), func() error { return unix.Unlink(p("a")) })
		},
		"rename x over a, open": func(p func(string) string) error {
			return withOpen(p("b"), func() error { return unix.Rename(p("x"), p("a")) })
		},
	}
	result := func(root, name string, fn func(func(string) string) error) string {
		dir := filepath.Join(root, strings.ReplaceAll(name, " ", "-"))
		p := func(rel string) string { return filepath.Join(dir, rel) }
		if err := os.MkdirAll(p("d"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"a", "x"} {
			if err := os.WriteFile(p(f), []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Link(p("a"), p("b")); err != nil {
			t.Fatal(err)
		}
		var before, after unix.Stat_t
		if err := unix.Lstat(p("b"), &before); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // past the clock's granularity
		res := outcome(fn(p))
		if err := unix.Lstat(p("b"), &after); err != nil {
			return fmt.Sprintf("%s, then b: %s", res, outcome(err))
		}
		return fmt.Sprintf("%s, then b: nlink %d, ctime changed %v", res, after.Nlink, after.Ctim != before.Ctim)
	}
	names := sortedKeys(cases)
	want := compareWithKernel(t, plain, ws.mountpoint, len(names), func(i int) string { return names[i] },
		func(dir string, i int) string { return result(dir, names[i], cases[names[i]]) })
	changed := 0
	for _, w := range want {
		if strings.HasSuffix(w, "changed true") {
			changed++
		}
	}
	if changed < 5 {
		t.Errorf("only %d of %d cases changed b's ctime on the plain directory", changed, len(cases))
	}
}

func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// withOpen runs fn while p is open for reading.
func withOpen(p string, fn func() error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return fn()
}
