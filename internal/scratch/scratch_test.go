package scratch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSweep: a staging directory whose job is gone (its lock let go, as
// the kernel does when a process dies) is removed with its lock; a live
// one is left alone, though this very process holds it; a directory whose
// lock is gone is debris too; nothing else is touched.
func TestSweep(t *testing.T) {
	parent := t.TempDir()
	live, err := Make(parent, "seal")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(live.Path, "f"), []byte("x"), 0o644)
	dead, err := Make(parent, "seal")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dead.Path, "bundle", "bin"), 0o755)
	dead.lock.Close() // as its process dying would
	orphan := filepath.Join(parent, Prefix+"image-0123456789ab")
	os.Mkdir(orphan, 0o755)
	other := filepath.Join(parent, "build-linux-0123456789ab")
	os.Mkdir(other, 0o755)

	removed, err := Sweep(parent)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{dead.Path, orphan}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("Sweep removed %v, want %v", removed, want)
	}
	for _, p := range []string{dead.Path, dead.Path + lockExt, orphan} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{live.Path, live.Path + lockExt, filepath.Join(live.Path, "f"), other} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("Sweep took a live job's or another's file: %v", err)
		}
	}
	if err := live.Remove(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 || ents[0].Name() != filepath.Base(other) {
		t.Errorf("after Remove, %s holds %v", parent, ents)
	}
}
