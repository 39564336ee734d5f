//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/vmimages"
)

// TestDebSourceFlagsRefuseBadInputEarly: every command that builds an image
// checks --deb-source before it verifies, builds or writes anything.
func TestDebSourceFlagsRefuseBadInputEarly(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, []byte("x"), 0o644)
	out := t.TempDir()
	for _, args := range [][]string{
		{"image", "--bundle", "/nonexistent/bundle", "--deb-source", "/does/not/exist"},
		{"image", "vm", "--deb-source", file},
		{"image", "export-debs", "--out", filepath.Join(out, "x"), "--deb-source", "ftp://mirror/debian"},
		{"seal", "--out", filepath.Join(out, "y"), "--deb-source", "/does/not/exist"},
		{"run", "--target", "local", "--deb-source", "/does/not/exist", "--out", filepath.Join(out, "z")},
		{"provision", "local", "--bundle", "/nonexistent/bundle", "--deb-source", file},
	} {
		code, _, stderr := run(t, args...)
		if code != ExitUnusable || !strings.Contains(stderr, "--deb-source") {
			t.Errorf("%v: exit %d, want %d naming --deb-source:\n%s", args, code, ExitUnusable, stderr)
		}
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("a refused command wrote %v", ents)
	}
	if code, _, stderr := run(t, "image", "export-debs"); code != ExitUnusable || !strings.Contains(stderr, "--out") {
		t.Errorf("export-debs without --out: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "image", "export-debs", "--out", file); code != ExitUnusable || !strings.Contains(stderr, "is a file") {
		t.Errorf("export-debs --out FILE: exit %d\n%s", code, stderr)
	}
}

// TestExportDebsCLI exports the Sandbox lock's packages through the command
// line, then exports again from the first export alone (as another machine
// would, given the directory), with apt and the snapshot out of reach.
func TestExportDebsCLI(t *testing.T) {
	testenv.Short(t, "fetches packages through apt")
	testenv.NeedCommand(t, "apt-get")
	t.Setenv(vmimages.SnapshotEnv, "off")
	first := t.TempDir()
	code, stdout, stderr := run(t, "image", "export-debs", "--json", "--images", "sandbox", "--out", first, "--cache", t.TempDir())
	if code == ExitFailed && strings.Contains(stdout, "missingPackages") {
		t.Logf("the committed sandbox lock's files are in no source here; export refused, as it must be: %s", stderr)
		return
	}
	if code != ExitOK {
		t.Fatalf("export-debs: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var got struct {
		Exported []vmimages.Exported `json:"exported"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Exported) != 1 {
		t.Fatalf("export-debs --json: %v\n%s", err, stdout)
	}
	lock, lb, _ := vmimages.DefaultLock("sandbox", "amd64")
	if got.Exported[0].Packages != len(lock.Packages) {
		t.Errorf("exported %d packages, the lock has %d", got.Exported[0].Packages, len(lock.Packages))
	}
	if b, err := os.ReadFile(filepath.Join(first, "lock-sandbox-amd64.json")); err != nil || manifests.DigestOf(b) != manifests.DigestOf(lb) {
		t.Errorf("the lock beside the export is not the committed one: %v", err)
	}
	// From the export alone: apt cannot run (no PATH), so every package
	// must come from the directory.
	t.Setenv("PATH", t.TempDir())
	second := t.TempDir()
	if code, stdout, stderr := run(t, "image", "export-debs", "--images", "sandbox", "--out", second, "--cache", t.TempDir(), "--deb-source", first); code != ExitOK {
		t.Fatalf("export-debs from the first export: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, p := range lock.Packages {
		if _, err := os.Stat(filepath.Join(second, filepath.Base(p.Filename))); err != nil {
			t.Errorf("%s was not exported from the directory: %v", p.Name, err)
		}
	}
}
