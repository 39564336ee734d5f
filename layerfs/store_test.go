//go:build linux

package layerfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

func newStore(t testing.TB, p Profile) *Store {
	t.Helper()
	s, err := Init(context.Background(), filepath.Join(t.TempDir(), "store"), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	e := Entry{Name: "f", Mode: 0o100640, UID: 1, GID: 2, Nlink: 2, Size: 5, Atime: -1, Mtime: 1e18, Ctime: 3,
		Content: Digest{1, 2}, LinkID: 7, Xattrs: []Xattr{{"user.a", []byte("b")}}}
	got, err := decodeEntry(encodeEntry(&e))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip: got %+v want %+v", got, e)
	}
	l := Entry{Name: "l", Mode: 0o120777, Target: "../x", Size: 4}
	data, d := encodeTree([]Entry{e, l})
	back, err := decodeTree(data, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].Name != "f" || back[1].Target != "../x" {
		t.Fatalf("tree round trip: %+v", back)
	}
	data[len(data)-1] ^= 1
	if _, err := decodeTree(data, d); err == nil {
		t.Fatal("corrupt tree decoded without error")
	}
}

func TestStoreRefusals(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, t.TempDir()); !errors.Is(err, ErrNotStore) {
		t.Errorf("empty dir: got %v, want ErrNotStore", err)
	}
	foreign := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(foreign, dbName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE x(y)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, foreign); !errors.Is(err, ErrNotStore) {
		t.Errorf("foreign db: got %v, want ErrNotStore", err)
	}
	s := newStore(t, ProfileFast)
	dir := s.Dir()
	if _, err := Init(ctx, dir, ProfileFast); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("init over a store: got %v", err)
	}
	s.Close()
	db, err = sql.Open("sqlite", filepath.Join(dir, dbName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, dir); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("newer schema: got %v, want ErrNewerSchema", err)
	}
}

func TestImportLogDiff(t *testing.T) {
	ctx := context.Background()
	for _, p := range []Profile{ProfileDurable, ProfileFast, ProfileDisposable} {
		t.Run(string(p), func(t *testing.T) {
			s := newStore(t, p)
			src := t.TempDir()
			writeFile(t, filepath.Join(src, "a"), "same")
			writeFile(t, filepath.Join(src, "d/b"), "same")
			writeFile(t, filepath.Join(src, "d/c"), "other")
			if err := os.Symlink("a", filepath.Join(src, "ln")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(src, "d/c"), filepath.Join(src, "hard")); err != nil {
				t.Fatal(err)
			}
			l1, err := s.Import(ctx, src, ImportOptions{Message: "one", Workers: 3})
			if err != nil {
				t.Fatal(err)
			}
			u, err := s.Usage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if u.Blobs != 2 || u.BlobBytes != int64(len("same")+len("other")) {
				t.Errorf("identical content should be stored once: %+v", u)
			}
			if len(l1.links) != 1 || !reflect.DeepEqual(l1.links[0], []string{"/d/c", "/hard"}) {
				t.Errorf("links: %q", l1.links)
			}
			writeFile(t, filepath.Join(src, "d/c"), "changed")
			os.Remove(filepath.Join(src, "a"))
			writeFile(t, filepath.Join(src, "new"), "n")
			if err := os.Chmod(filepath.Join(src, "d/b"), 0o600); err != nil {
				t.Fatal(err)
			}
			l2, err := s.Import(ctx, src, ImportOptions{Message: "two", Parent: l1.ID})
			if err != nil {
				t.Fatal(err)
			}
			log, err := s.Log(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(log) != 2 || log[0].ID != l2.ID || log[1].ID != l1.ID || log[0].Parent != l1.ID {
				t.Fatalf("log: %+v", log)
			}
			got, err := s.ResolveLayer(ctx, l2.ID.String()[:8])
			if err != nil || got.ID != l2.ID {
				t.Fatalf("resolve: %v %v", got, err)
			}
			changes, err := s.Diff(ctx, l1, l2)
			if err != nil {
				t.Fatal(err)
			}
			want := []Change{{Kind: daemonapi.Deleted, Path: "/a"}, {Kind: daemonapi.Metadata, Path: "/d/b"}, {Kind: daemonapi.Modified, Path: "/d/c"}, {Kind: daemonapi.Modified, Path: "/hard"}, {Kind: daemonapi.Added, Path: "/new"}}
			var filtered []Change
			for _, c := range changes {
				if c.Path != "/" && c.Path != "/d" && c.Path != "/ln" { // reading a symlink may update its atime
					filtered = append(filtered, c)
				}
			}
			if !reflect.DeepEqual(filtered, want) {
				t.Errorf("diff: got %v want %v", filtered, want)
			}
			if v, err := s.IntegrityCheck(ctx); err != nil || v != "ok" {
				t.Errorf("integrity: %q %v", v, err)
			}
		})
	}
}

// TestUsageIgnoresCheckpoints: the Store's database bytes are the bytes
// its rows hold, so a checkpoint (which copies pages from the WAL into the
// main file whenever it runs, growing that file) does not change them,
// where the files' sizes move; nor does when the Store was made (its
// creation time is one length): the Store's bytes are an exact count in a
// run, and when a checkpoint ran is timing.
func TestUsageIgnoresCheckpoints(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	src := t.TempDir()
	for i := range 64 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("d%d/f%d", i%8, i)), strings.Repeat("x", i))
	}
	if _, err := s.Import(ctx, src, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	files := func() (n int64) {
		for _, suffix := range []string{"", "-wal"} {
			if st, err := os.Stat(filepath.Join(s.dir, dbName+suffix)); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	before, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	filesBefore := files()
	if _, err := s.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		t.Fatal(err)
	}
	after, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if files() == filesBefore {
		t.Fatalf("the checkpoint left the files' sizes as they were (%d bytes): the test shows nothing", filesBefore)
	}
	if after.DBBytes != before.DBBytes || before.DBBytes == 0 {
		t.Errorf("database bytes %d before the checkpoint, %d after: want one number", before.DBBytes, after.DBBytes)
	}
	var created string
	if err := s.db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'created'").Scan(&created); err != nil {
		t.Fatal(err)
	}
	if want := len("2026-12-07T09:00:00.000000000Z"); len(created) != want {
		t.Errorf("the Store's creation time %q is %d bytes, want %d whatever the time", created, len(created), want)
	}
}
