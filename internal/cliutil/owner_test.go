package cliutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestGiveToSudoUser: under sudo (SUDO_UID set, running as root), what a
// command made, from the topmost directory it made down, goes to that
// user; what was there before does not; outside sudo nothing changes.
func TestGiveToSudoUser(t *testing.T) {
	testenv.NeedRoot(t)
	base := t.TempDir()
	var o Outputs
	o.Makes(filepath.Join(base, "out", "runs", "r1"))
	o.Makes(base) // exists: not ours
	if err := os.MkdirAll(filepath.Join(base, "out", "runs", "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "out", "runs", "r1", "report.md")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "out", "link")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	o.Made(filepath.Join(base, "gone"))
	fifo := filepath.Join(base, "out", "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Setenv("SUDO_UID", "")
	if err := o.GiveToSudoUser(); err != nil || owner(t, file) != 0 {
		t.Fatalf("outside sudo: %v, owner %d", err, owner(t, file))
	}
	t.Setenv("SUDO_UID", "4242")
	t.Setenv("SUDO_GID", "4343")
	if err := o.GiveToSudoUser(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(base, "out"), filepath.Join(base, "out", "runs"), file, link} {
		if uid, gid := ownerGroup(t, p); uid != 4242 || gid != 4343 {
			t.Errorf("%s is %d:%d, want 4242:4343", p, uid, gid)
		}
	}
	if owner(t, base) != 0 || owner(t, "/etc/passwd") != 0 || owner(t, fifo) != 0 {
		t.Errorf("what was there before, or a fifo, changed hands: %s %d, /etc/passwd %d, fifo %d", base, owner(t, base), owner(t, "/etc/passwd"), owner(t, fifo))
	}
}

func owner(t *testing.T, p string) int { uid, _ := ownerGroup(t, p); return uid }

func ownerGroup(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}
