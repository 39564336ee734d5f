//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestMakeInstall runs `make install` into a DESTDIR, as a packager
// does, and checks what a user then has: both binaries, which run; a man
// page per command; bash, zsh and fish completions; then `make
// uninstall` takes all of it away again.
func TestMakeInstall(t *testing.T) {
	testenv.Short(t, "builds sealbench and layerfsd")
	makeCmd := testenv.NeedCommand(t, "make")
	root := testenv.ModuleRoot(t)
	dest, out := t.TempDir(), t.TempDir()
	mk := func(target string) string {
		c := exec.Command(makeCmd, "-C", root, "--no-print-directory", target, "DESTDIR="+dest, "PREFIX=/usr", "OUT="+out)
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, b)
		}
		return string(b)
	}
	mk("install")
	usr := filepath.Join(dest, "usr")
	for _, bin := range []string{"sealbench", "layerfsd"} {
		b, err := exec.Command(filepath.Join(usr, "bin", bin), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(b), bin) {
			t.Errorf("the installed %s --version: %v\n%s", bin, err, b)
		}
	}
	for path, want := range map[string]string{
		"share/man/man1/sealbench.1":                     ".TH \"sealbench\" \"1\"",
		"share/man/man1/sealbench-run.1":                 "--target",
		"share/man/man1/sealbench-report.1":              "benchstat",
		"share/man/man1/layerfsd-mount.1":                ".TH",
		"share/bash-completion/completions/sealbench":    "__start_sealbench",
		"share/zsh/site-functions/_sealbench":            "#compdef sealbench",
		"share/fish/vendor_completions.d/sealbench.fish": "complete -c sealbench",
		"share/bash-completion/completions/layerfsd":     "__start_layerfsd",
		"share/fish/vendor_completions.d/layerfsd.fish":  "complete -c layerfsd",
	} {
		b, err := os.ReadFile(filepath.Join(usr, path))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v, want it to hold %q", path, err, want)
		}
	}
	// No page for a hidden command (a target's helper process).
	if _, err := os.Stat(filepath.Join(usr, "share/man/man1/sealbench-kube-engine.1")); err == nil {
		t.Errorf("a man page for the hidden command kube-engine")
	}
	mk("uninstall")
	var left []string
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("make uninstall left %s", strings.Join(left, ", "))
	}
}
