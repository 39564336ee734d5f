//go:build linux

package cli

import (
	"database/sql"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// badFixture is what the bad-input cases point at: a good Store, the same
// Store damaged three ways, a directory to import, a file, a directory
// that is not empty, and a mount point.
type badFixture struct {
	dir, good, tampered, truncated, emptyDB, src, file, full, ws string
}

func newBadFixture(t *testing.T) *badFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &badFixture{dir: dir, good: filepath.Join(dir, "good"), tampered: filepath.Join(dir, "tampered"),
		truncated: filepath.Join(dir, "truncated"), emptyDB: filepath.Join(dir, "emptydb"), src: filepath.Join(dir, "src"),
		file: filepath.Join(dir, "file"), full: filepath.Join(dir, "full"), ws: filepath.Join(dir, "ws")}
	for i := 0; i < 40; i++ {
		d := filepath.Join(fx.src, "d"+itoa(i))
		os.MkdirAll(d, 0o755)
		for j := 0; j < 20; j++ {
			os.WriteFile(filepath.Join(d, "f"+itoa(j)), []byte(strings.Repeat(itoa(i*j), 10)), 0o644)
		}
	}
	os.WriteFile(fx.file, []byte("a file\n"), 0o644)
	os.MkdirAll(filepath.Join(fx.full, "x"), 0o755)
	os.Mkdir(fx.ws, 0o755)
	t.Cleanup(func() {
		// A mount that should have been refused and was not: its daemon,
		// then its mount.
		for _, st := range []string{fx.good, fx.tampered, fx.truncated, fx.emptyDB} {
			if b, err := os.ReadFile(filepath.Join(st, "mount.json")); err == nil {
				var r struct{ PID int }
				if json.Unmarshal(b, &r) == nil && r.PID > 0 {
					syscall.Kill(r.PID, syscall.SIGKILL)
				}
			}
		}
		syscall.Unmount(fx.ws, syscall.MNT_DETACH)
	})
	run(t, daemonapi.ExitOK, "init", "--store", fx.good, "--profile", "fast")
	run(t, daemonapi.ExitOK, "import", "--store", fx.good, "--from", fx.src)
	for _, d := range []string{fx.tampered, fx.truncated, fx.emptyDB} {
		if err := copyTree(fx.good, d); err != nil {
			t.Fatal(err)
		}
	}
	// Tampered: 20 pages overwritten in place, the size unchanged (what
	// the probe did).
	db := filepath.Join(fx.tampered, "layerfs.db")
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	pages := int(st.Size() / 4096)
	if pages < 25 {
		t.Fatalf("the fixture's database has %d pages, too few to damage 20 of them", pages)
	}
	rng := rand.New(rand.NewSource(22))
	junk := make([]byte, 4096)
	for _, p := range rng.Perm(pages - 1)[:20] {
		rng.Read(junk)
		f.WriteAt(junk, int64(p+1)*4096)
	}
	f.Close()
	// Truncated to half; and a database file that is empty.
	db = filepath.Join(fx.truncated, "layerfs.db")
	os.Truncate(db, st.Size()/2)
	os.Truncate(filepath.Join(fx.emptyDB, "layerfs.db"), 0)
	return fx
}

func copyTree(from, to string) error {
	return filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, fi.Mode().Perm())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, fi.Mode().Perm())
	})
}

// TestBadInput runs layerfsd's commands with each class of bad input
// (missing, wrong type, empty, truncated, tampered, too long, hostile path,
// out-of-range number, conflicting flags): each exits with the documented
// code, stderr names the problem and the next step, and nothing in the
// fixture (Stores, sources, mount point) was created or changed: a
// refused mount starts no daemon and writes no daemon.log. Keep adding to
// it as commands grow.
func TestBadInput(t *testing.T) {
	fx := newBadFixture(t)
	long := filepath.Join(fx.dir, strings.Repeat("c", 120)+".sock")
	mount := func(store string, more ...string) []string {
		return append([]string{"mount", "--store", store, "--workspace", fx.ws, "--control", filepath.Join(fx.dir, "ctl.sock"), "--fuse-transport", "dev"}, more...)
	}
	damaged := []string{"store is damaged", "restore the Store from a backup", "re-import"}
	for _, tc := range []struct {
		class  string
		args   []string
		code   int
		stderr []string // the problem and the next step
	}{
		{"missing", []string{"log", "--store", filepath.Join(fx.dir, "nope")}, daemonapi.ExitStore, []string{"does not exist", "layerfsd init"}},
		{"missing", []string{"import", "--store", fx.good, "--from", filepath.Join(fx.dir, "nope")}, daemonapi.ExitUsage, []string{"does not exist", "give --from"}},
		{"missing", []string{"mount", "--store", fx.good, "--workspace", fx.ws}, daemonapi.ExitUsage, []string{"needs --control"}},
		{"missing", []string{"check"}, daemonapi.ExitUsage, []string{"needs --store"}},
		{"wrong type", []string{"init", "--store", fx.file}, daemonapi.ExitUsage, []string{"it is a file", "does not exist or is empty"}},
		{"wrong type", []string{"import", "--store", fx.good, "--from", fx.file}, daemonapi.ExitUsage, []string{"it is a file", "give --from"}},
		{"wrong type", []string{"log", "--store", fx.file}, daemonapi.ExitStore, []string{"not a directory", "give --store"}},
		{"wrong type", mount(fx.good, "--layer", "zz"), daemonapi.ExitLayer, []string{"zz"}},
		{"empty", []string{"log", "--store", ""}, daemonapi.ExitUsage, []string{"needs --store"}},
		{"empty", []string{"init", "--store", fx.full}, daemonapi.ExitUsage, []string{"holds 1 entries", "new or empty directory"}},
		{"empty", []string{"log", "--store", fx.emptyDB}, daemonapi.ExitStore, append([]string{"layerfs.db is empty"}, damaged...)},
		{"truncated", []string{"log", "--store", fx.truncated}, daemonapi.ExitStore, append([]string{"cut short"}, damaged...)},
		{"truncated", mount(fx.truncated), daemonapi.ExitStore, append([]string{"cut short"}, damaged...)},
		{"truncated", []string{"check", "--store", fx.truncated}, daemonapi.ExitStore, damaged},
		{"tampered", mount(fx.tampered), daemonapi.ExitStore, damaged},
		{"tampered", []string{"show", "--store", fx.tampered, "abcd"}, daemonapi.ExitStore, damaged},
		{"tampered", []string{"check", "--store", fx.tampered, "--quick"}, daemonapi.ExitStore, damaged},
		{"tampered", []string{"check", "--store", fx.tampered}, daemonapi.ExitStore, damaged},
		{"too long", mount(fx.good, "--control", long), daemonapi.ExitUsage, []string{"at most 107", "use a shorter path"}},
		{"too long", []string{"stats", "--control", long}, daemonapi.ExitUsage, []string{"at most 107", "use a shorter path"}},
		{"hostile path", mount(fx.good, "--control", filepath.Join(fx.good, "layerfs.db")), daemonapi.ExitUsage, []string{"not a socket", "give --control a path where nothing is"}},
		{"hostile path", mount(fx.good, "--control", fx.file), daemonapi.ExitUsage, []string{"not a socket", "regular file"}},
		{"hostile path", []string{"mount", "--store", fx.good, "--workspace", fx.full, "--control", filepath.Join(fx.dir, "c.sock")}, daemonapi.ExitMountpt, []string{"not empty"}},
		{"out-of-range number", mount(fx.good, "--ready-timeout", "-1s"), daemonapi.ExitUsage, []string{"--ready-timeout -1s", "positive duration"}},
		{"out-of-range number", []string{"stats", "--control", filepath.Join(fx.dir, "c.sock"), "--timeout", "-5s"}, daemonapi.ExitUsage, []string{"--timeout -5s", "positive duration"}},
		{"conflicting flags", mount(fx.good, "--control", filepath.Join(fx.ws, "ctl.sock")), daemonapi.ExitUsage, []string{"inside --workspace", "outside the Workspace"}},
		{"conflicting flags", mount(fx.good, "--overlay-dir", filepath.Join(fx.ws, "o")), daemonapi.ExitUsage, []string{"--overlay-dir", "inside --workspace"}},
	} {
		t.Run(tc.class+"/"+strings.Join(tc.args[:1], ""), func(t *testing.T) {
			before := testenv.Snapshot(t, fx.dir)
			r := layerfsd(t, tc.args...)
			if r.code != tc.code {
				t.Errorf("layerfsd %q: exit %d, want %d; stderr %q", tc.args, r.code, tc.code, r.stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("layerfsd %q: stderr %q does not say %q", tc.args, r.stderr, s)
				}
			}
			if d := testenv.SnapshotDiff(before, testenv.Snapshot(t, fx.dir)); len(d) > 0 {
				t.Errorf("layerfsd %q: refused, yet changed the fixture: %v", tc.args, d)
			}
		})
	}
}

// TestDaemonLogsEIOOncePerCause damages a tree so that SQLite cannot tell
// (the row is sound, its content is not what its digest says): the quick
// check passes (check, which reads every tree, does not), the mount goes ahead, and each access to the directory is EIO.
// daemon.log says why, once, and at unmount how often.
func TestDaemonLogsEIOOncePerCause(t *testing.T) {
	needFUSE(t)
	e := newEnv(t, "fast")
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub", "deeper"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "deeper", "f"), []byte("f"), 0o644)
	run(t, daemonapi.ExitOK, "import", "--store", e.store, "--from", src)
	db, err := sql.Open("sqlite", filepath.Join(e.store, "layerfs.db"))
	if err != nil {
		t.Fatal(err)
	}
	// Every tree but the root's (the longest) gets other bytes.
	res, err := db.Exec(`UPDATE trees SET data = X'00' || data WHERE length(data) < (SELECT max(length(data)) FROM trees)`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatal("no tree was damaged")
	}
	db.Close()
	// The database check cannot tell; reading the trees can.
	run(t, daemonapi.ExitOK, "check", "--store", e.store, "--quick")
	if r := run(t, daemonapi.ExitStore, "check", "--store", e.store); !strings.Contains(r.stdout, "trees: directory /") || !strings.Contains(r.stdout, "content hashes to") {
		t.Errorf("check does not name the damaged directory:\n%s", r.stdout)
	}
	e.mount(t)
	for i := 0; i < 5; i++ {
		if _, err := os.ReadDir(filepath.Join(e.mnt, "sub")); err == nil || !strings.Contains(err.Error(), "input/output error") {
			t.Fatalf("reading a damaged directory: %v, want EIO", err)
		}
	}
	run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
	var log string
	testenv.Eventually(t, "daemon.log naming the damaged directory", 20*time.Millisecond, func() bool { // the daemon's last lines
		b, _ := os.ReadFile(filepath.Join(e.store, "daemon.log"))
		log = string(b)
		return strings.Contains(log, "times: EIO: tree object")
	})
	if n := strings.Count(log, "answered the kernel EIO: loading directory inode"); n != 1 {
		t.Errorf("daemon.log names the cause %d times, want once:\n%s", n, log)
	}
	if !strings.Contains(log, "content hashes to") || !strings.Contains(log, "times: EIO: tree object") {
		t.Errorf("daemon.log does not say why, and how often:\n%s", log)
	}
}
