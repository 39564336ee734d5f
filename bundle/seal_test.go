package bundle

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
)

// copyCheckout copies the files git knows of (tracked, and untracked but
// not ignored) into a fresh git repository with one commit at a fixed time,
// so the test seals a clean tree whatever state the developer's tree is in.
func copyCheckout(t *testing.T) string {
	t.Helper()
	root := testenv.ModuleRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		testenv.Skip(t, "needs the source as a git checkout: %v", err)
	}
	dst := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or not a plain file
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755)
		if err := os.WriteFile(filepath.Join(dst, rel), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dst
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	run("add", "-A")
	run("commit", "-q", "-m", "snapshot")
	return dst
}

// readTree returns every file under dir with its bytes, mode and mtime.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String() + " " + fi.ModTime().UTC().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += " " + manifests.DigestOf(b).String()
		}
		tree[rel] = v
		return nil
	})
	return tree
}

// TestSealReproducible seals the same commit twice, the second time with an
// empty Go build cache, and requires byte-identical bundles and tars with
// the same name; then checks the bundle verifies, that `sha256sum -c`
// accepts its SHA256SUMS, and that a dirty tree is marked so.
func TestSealReproducible(t *testing.T) {
	testenv.Short(t, "builds the shipped binaries three times, once with a cold cache")
	testenv.NeedCommand(t, "git")
	src := copyCheckout(t)
	k := newKeys(t)
	ctx := context.Background()

	out1, out2 := t.TempDir(), t.TempDir()
	a, err := Seal(ctx, SealOptions{Source: src, OutDir: out1, Signer: k.signer, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Seal(ctx, SealOptions{Source: src, OutDir: out2, Signer: k.signer, Log: t.Logf,
		BuildEnv: []string{"GOCACHE=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != b.Name || a.TarDigest != b.TarDigest {
		t.Errorf("two seals of one commit differ: %s (tar %s) and %s (tar %s)", a.Name, a.TarDigest, b.Name, b.TarDigest)
	}
	ta, tb := readTree(t, a.Dir), readTree(t, b.Dir)
	if len(ta) != len(tb) {
		t.Errorf("two seals hold %d and %d entries", len(ta), len(tb))
	}
	for p, v := range ta {
		if tb[p] != v {
			t.Errorf("%s differs between two seals:\n  %s\n  %s", p, v, tb[p])
		}
	}
	ba, _ := os.ReadFile(a.Tar)
	bb, _ := os.ReadFile(b.Tar)
	if !bytes.Equal(ba, bb) {
		t.Error("the two tars differ")
	}

	m := a.Manifest
	if m.Source.Dirty || m.Source.Commit == "" || !strings.HasSuffix(m.Source.Version, m.Source.Commit[:12]) {
		t.Errorf("clean seal: source %+v", m.Source)
	}
	for _, p := range Platforms {
		for _, part := range Parts {
			f, ok := m.File("bin/" + p.Dir() + "/" + part.Name)
			if want := p.OS == "linux" || !part.LinuxOnly; ok != want || ok && (f.Mode != 0o755 || f.Size == 0) {
				t.Errorf("bin/%s/%s in the manifest: %v, want %v: %+v", p.Dir(), part.Name, ok, want, f)
			}
		}
	}
	if _, ok := m.File(RunnerPath("darwin", "arm64")); !ok {
		t.Error("the bundle has no runner for macOS hosts")
	}
	if _, ok := m.File("cells/C12.sh"); !ok {
		t.Error("manifest lacks cells/C12.sh")
	}
	// Every built-in suite is sealed at suites/NAME/: what its suite.json
	// names, and nothing else (no Go source).
	for _, p := range []string{"suites/agent-tools/suite.json", "suites/agent-tools/T5.sh", "suites/agent-tools/setup-git.sh"} {
		if f, ok := m.File(p); !ok || f.Mode != 0o644 {
			t.Errorf("manifest lacks %s, or has its mode wrong: %+v", p, f)
		}
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "suites/") && strings.HasSuffix(f.Path, ".go") {
			t.Errorf("the bundle holds %s", f.Path)
		}
	}
	for _, p := range []string{a.Dir, a.Tar} {
		if _, err := Verify(ctx, p, VerifyOptions{Verifier: k.verifier}); err != nil {
			t.Errorf("Verify(%s): %v", p, err)
		}
	}
	if sum, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sum, "-c", "--strict", manifests.SumsFile)
		cmd.Dir = a.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
	// The shipped binary runs and says which source it came from.
	if out, err := exec.Command(filepath.Join(a.Dir, "bin/linux-amd64/sealbench"), "version").Output(); err != nil || !strings.Contains(string(out), m.Source.Version) || !strings.Contains(string(out), "in-bundle") {
		t.Errorf("shipped sealbench version: %q, %v", out, err)
	}

	// A dirty tree seals, marked dirty, with a warning.
	os.WriteFile(filepath.Join(src, "runner/cells/C01.sh"), []byte("echo changed\n"), 0o644)
	var log strings.Builder
	d, err := Seal(ctx, SealOptions{Source: src, OutDir: t.TempDir(), Signer: k.signer, Log: func(f string, args ...any) {
		log.WriteString(strings.TrimSpace(f) + "\n")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Manifest.Source.Dirty || !strings.HasSuffix(d.Manifest.Source.Version, ".dirty") || d.Name == a.Name {
		t.Errorf("dirty seal: name %s, source %+v", d.Name, d.Manifest.Source)
	}
	if !strings.Contains(log.String(), "dirty") {
		t.Errorf("no warning about the dirty tree in the log:\n%s", log.String())
	}
}

// TestSealFailureLeavesNoOutDir: a seal that fails after creating --out
// (here, a build) takes away the directories it made, and a source that is
// not sealbench's is refused before anything is made.
func TestSealFailureLeavesNoOutDir(t *testing.T) {
	root := testenv.ModuleRoot(t)
	k := newKeys(t)
	goBin := filepath.Join(t.TempDir(), "go")
	script := "#!/bin/sh\nif [ \"$1\" = env ]; then echo go1.26.8; exit 0; fi\necho 'build failed' >&2; exit 1\n"
	if err := os.WriteFile(goBin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	out := filepath.Join(parent, "a", "b")
	if _, err := Seal(context.Background(), SealOptions{Source: root, OutDir: out, Signer: k.signer, GoBinary: goBin}); err == nil {
		t.Fatal("Seal with a failing build succeeded")
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("a failed seal left %v in %s", ents, parent)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644)
	if _, err := Seal(context.Background(), SealOptions{Source: other, OutDir: out, Signer: k.signer, GoBinary: goBin}); !errors.Is(err, ErrNotSource) {
		t.Errorf("Seal of another module: %v, want ErrNotSource", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("a refused seal left %v in %s", ents, parent)
	}
}

// TestCopySuites: each suite, built in or the user's, is sealed at
// suites/NAME/ as its suite.json names it; a suite that is not valid,
// or a second suite of one name, stops the seal with the problem named.
func TestCopySuites(t *testing.T) {
	builtin := t.TempDir()
	mine := filepath.Join(t.TempDir(), "mine")
	suite := `{"kind": "sealbench.suite", "name": "mine", "title": "mine",
		"cells": [{"id": "M1", "title": "one", "body": "M1.sh", "verifies": "one file",
		"checks": [{"name": "one file", "script": "find . -type f | wc -l", "want": "1"}]}]}`
	os.MkdirAll(mine, 0o755)
	os.WriteFile(filepath.Join(mine, "suite.json"), []byte(suite), 0o644)
	os.WriteFile(filepath.Join(mine, "M1.sh"), []byte("echo > f\n"), 0o644)
	to := filepath.Join(t.TempDir(), "suites")
	if err := copySuites(builtin, []string{mine}, to); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "mine", "M1.sh")); err != nil || string(b) != "echo > f\n" {
		t.Errorf("suites/mine/M1.sh: %q, %v", b, err)
	}
	if err := copySuites(builtin, []string{mine, mine}, filepath.Join(t.TempDir(), "suites")); err == nil || !strings.Contains(err.Error(), `both named "mine"`) {
		t.Errorf("two suites named mine: %v", err)
	}
	os.WriteFile(filepath.Join(mine, "stray.sh"), []byte("rm -rf /\n"), 0o644)
	if err := copySuites(builtin, []string{mine}, filepath.Join(t.TempDir(), "suites")); err == nil || !strings.Contains(err.Error(), "stray.sh") {
		t.Errorf("a script the suite does not name: %v", err)
	}
}
