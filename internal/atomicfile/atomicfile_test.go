package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "two" || fi.Mode().Perm() != 0o644 {
		t.Errorf("after two writes: %q, mode %o", b, fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".f.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	if err := Create(p, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, []byte("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first" {
		t.Errorf("a refused Create changed the file: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".key.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteIntoMissingDirectory(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "f"), nil, 0o644); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// TestWriteFileNeverReplacesOthers: a symlink, a fifo or a directory at
// the path is left as it was, and the write refused.
func TestWriteFileNeverReplacesOthers(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	os.WriteFile(p("real"), []byte("real"), 0o644)
	os.Symlink("real", p("link"))
	syscall.Mkfifo(p("fifo"), 0o644)
	os.Mkdir(p("dir"), 0o755)
	for _, n := range []string{"link", "fifo", "dir"} {
		before, _ := os.Lstat(p(n))
		if err := WriteFile(p(n), []byte("new"), 0o644); !errors.Is(err, ErrNotRegular) {
			t.Errorf("WriteFile over a %v: %v, want ErrNotRegular", before.Mode().Type(), err)
		}
		if after, err := os.Lstat(p(n)); err != nil || after.Mode() != before.Mode() {
			t.Errorf("%s changed: %v to %v", n, before.Mode(), after.Mode())
		}
	}
	if b, _ := os.ReadFile(p("real")); string(b) != "real" {
		t.Errorf("the file behind the link changed: %q", b)
	}
}

// TestWriteOutput: a user's output path is followed when a symlink,
// streamed into when a fifo, replaced atomically when a file, and refused
// when a link to nothing or a directory.
func TestWriteOutput(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	os.WriteFile(p("real"), []byte("old"), 0o644)
	os.Symlink("real", p("link"))
	os.Symlink("nothing", p("dangling"))
	os.Symlink("dir", p("to-dir"))
	os.Mkdir(p("dir"), 0o755)
	if err := syscall.Mkfifo(p("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := WriteOutput(p("link"), []byte("through"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p("real")); string(b) != "through" {
		t.Errorf("the file behind the link holds %q", b)
	}
	if fi, _ := os.Lstat(p("link")); fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("the link became a %v", fi.Mode().Type())
	}

	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(p("fifo"))
		got <- string(b)
	}()
	if err := WriteOutput(p("fifo"), []byte("streamed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(p("fifo")); fi.Mode().Type() != fs.ModeNamedPipe {
		t.Fatalf("the fifo became a %v", fi.Mode().Type())
	}
	if s := <-got; s != "streamed" {
		t.Errorf("the fifo's reader got %q", s)
	}

	for _, n := range []string{"dangling", "to-dir", "dir"} {
		if err := WriteOutput(p(n), []byte("x"), 0o644); !errors.Is(err, ErrNotRegular) || CheckOutput(p(n)) == nil {
			t.Errorf("WriteOutput to %s: %v, want ErrNotRegular", n, err)
		}
	}
	if _, err := os.Lstat(p("nothing")); err == nil {
		t.Error("writing through a dangling link created its target")
	}
	if err := WriteOutput(p("new"), []byte("fresh"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p("new")); string(b) != "fresh" {
		t.Errorf("a new output holds %q", b)
	}
}
