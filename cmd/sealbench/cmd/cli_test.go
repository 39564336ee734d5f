//go:build !sealbench_bundle

package cmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/term"

	"github.com/sealbench/sealbench/internal/testenv"
)

const testPassword = "cli-test-password-do-not-log"

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// TestSealAndVerifyCLI drives the real commands: keygen, seal (a real
// build), verify of the directory and the tar, and each exit code.
func TestSealAndVerifyCLI(t *testing.T) {
	testenv.Short(t, "seals a real bundle")
	t.Setenv("SEALBENCH_PASSWORD", testPassword)
	keys, other := t.TempDir(), t.TempDir()
	out := t.TempDir()

	if code, _, stderr := run(t, "keygen", "--out", keys); code != ExitOK {
		t.Fatalf("keygen: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, "keygen", "--out", keys); code != ExitUnusable || !strings.Contains(stderr, "--force") {
		t.Errorf("keygen over existing keys: exit %d, %s", code, stderr)
	}
	run(t, "keygen", "--out", other)

	code, stdout, stderr := run(t, "seal", "--json", "--key", filepath.Join(keys, "sealbench.key"), "--out", out, "--source", testenv.ModuleRoot(t))
	if code != ExitOK {
		t.Fatalf("seal: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var sealed struct {
		Name, Dir, Tar string
		Files          int
		Image          struct{ Tar, ID, Bundle string }
		Attestation    string
	}
	if err := json.Unmarshal([]byte(stdout), &sealed); err != nil || sealed.Name == "" || sealed.Files == 0 {
		t.Fatalf("seal --json printed %q: %v", stdout, err)
	}
	if _, err := os.Stat(sealed.Image.Tar); err != nil || sealed.Image.Bundle != sealed.Name || !strings.HasPrefix(sealed.Image.ID, "sha256:") {
		t.Errorf("seal built no Sandbox image next to the bundle: %+v, %v", sealed.Image, err)
	}
	for _, s := range []string{stdout, stderr} {
		if strings.Contains(s, testPassword) {
			t.Error("seal printed the password")
		}
	}

	// The attestation lies beside the bundle, not in it; sealing again
	// gives the same bundle and tar, byte for byte.
	if sealed.Attestation != sealed.Dir+".sigstore.json" {
		t.Errorf("seal wrote its attestation to %q, not beside the bundle", sealed.Attestation)
	}
	before, tarBefore := treeDigests(t, sealed.Dir), fileDigest(t, sealed.Tar)
	if _, ok := before[filepath.Base(sealed.Attestation)]; ok || len(before) != sealed.Files+3 {
		t.Errorf("the bundle holds %d files, want its %d and manifest.json, manifest.sig, SHA256SUMS", len(before), sealed.Files)
	}
	attBefore := fileDigest(t, sealed.Attestation)
	if code, stdout, stderr := run(t, "seal", "--no-image", "--key", filepath.Join(keys, "sealbench.key"), "--out", out, "--source", testenv.ModuleRoot(t)); code != ExitOK {
		t.Fatalf("seal again: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if after := treeDigests(t, sealed.Dir); !maps.Equal(before, after) || fileDigest(t, sealed.Tar) != tarBefore {
		t.Error("sealing twice gave another bundle directory or tar")
	}
	if fileDigest(t, sealed.Attestation) == attBefore {
		t.Error("the second seal (without an image, at another time) did not write its own attestation")
	}

	pub := filepath.Join(keys, "sealbench.pub")
	for _, p := range []string{sealed.Dir, sealed.Tar} {
		code, stdout, stderr := run(t, "verify", "--bundle", p, "--key", pub)
		if code != ExitOK || !strings.Contains(stdout, "verified "+sealed.Name) ||
			!strings.Contains(stdout, "checked manifest.sig and "+sealed.Name+".sigstore.json: SLSA provenance v1") {
			t.Errorf("verify %s: exit %d\n%s%s", p, code, stdout, stderr)
		}
	}
	code, stdout, _ = run(t, "verify", "--json", "--bundle", sealed.Tar, "--key", pub)
	var v struct {
		Verified bool
		Name     string
	}
	if err := json.Unmarshal([]byte(stdout), &v); code != ExitOK || err != nil || !v.Verified || v.Name != sealed.Name {
		t.Errorf("verify --json: exit %d, %q, %v", code, stdout, err)
	}

	// Exit 2: an attestation signed by another key; exit 1: one of another
	// bundle. Without one, verify says it checked manifest.sig alone.
	att, _ := os.ReadFile(sealed.Attestation)
	otherAtt := filepath.Join(t.TempDir(), "other")
	os.MkdirAll(otherAtt, 0o755)
	if code, stdout, stderr := run(t, "seal", "--no-image", "--key", filepath.Join(other, "sealbench.key"), "--out", otherAtt, "--source", testenv.ModuleRoot(t)); code != ExitOK {
		t.Fatalf("seal with the other key: exit %d\n%s%s", code, stdout, stderr)
	}
	byOther, _ := os.ReadFile(filepath.Join(otherAtt, sealed.Name+".sigstore.json"))
	os.WriteFile(sealed.Attestation, byOther, 0o644)
	if code, _, stderr := run(t, "verify", "--bundle", sealed.Dir, "--key", pub); code != ExitSignature || !strings.Contains(stderr, ".sigstore.json") {
		t.Errorf("verify with an attestation by another key: exit %d, want %d: %s", code, ExitSignature, stderr)
	}
	os.Remove(sealed.Attestation)
	if code, stdout, _ := run(t, "verify", "--bundle", sealed.Dir, "--key", pub); code != ExitOK || !strings.Contains(stdout, "no attestation was checked") {
		t.Errorf("verify without an attestation: exit %d: %s", code, stdout)
	}
	os.WriteFile(sealed.Attestation, att, 0o644)

	// Exit 2: another key; no key at all.
	if code, _, _ := run(t, "verify", "--bundle", sealed.Dir, "--key", filepath.Join(other, "sealbench.pub")); code != ExitSignature {
		t.Errorf("verify with another key: exit %d, want %d", code, ExitSignature)
	}
	if code, _, stderr := run(t, "verify", "--bundle", sealed.Dir, "--key", pub, "--id", "build-linux-000000000000"); code != ExitSignature || !strings.Contains(stderr, "pinned") {
		t.Errorf("verify pinned to another bundle: exit %d, want %d: %s", code, ExitSignature, stderr)
	}
	if code, _, _ := run(t, "verify", "--bundle", sealed.Dir, "--key", pub, "--id", sealed.Name); code != ExitOK {
		t.Errorf("verify pinned to itself: exit %d", code)
	}
	if code, _, _ := run(t, "verify", "--bundle", sealed.Dir, "--key", filepath.Join(other, "absent.pub")); code != ExitSignature {
		t.Errorf("verify with no key: exit %d, want %d", code, ExitSignature)
	}
	// Exit 3: not a bundle; no --bundle; an unknown flag; a private key as --key.
	for _, args := range [][]string{
		{"verify", "--bundle", keys, "--key", pub},
		{"verify", "--key", pub},
		{"verify", "--bundel", sealed.Dir},
		{"verify", "--bundle", sealed.Dir, "--key", filepath.Join(keys, "sealbench.key")},
		{"frobnicate"},
	} {
		if code, _, stderr := run(t, args...); code != ExitUnusable {
			t.Errorf("%v: exit %d, want %d: %s", args, code, ExitUnusable, stderr)
		}
	}
	// Exit 3: a wrong password, which is never echoed.
	t.Setenv("SEALBENCH_PASSWORD", "wrong-"+testPassword)
	code, stdout, stderr = run(t, "seal", "--key", filepath.Join(keys, "sealbench.key"), "--out", out, "--source", testenv.ModuleRoot(t))
	if code != ExitUnusable || !strings.Contains(stderr, "wrong password") || strings.Contains(stdout+stderr, testPassword) {
		t.Errorf("seal with a wrong password: exit %d\n%s%s", code, stdout, stderr)
	}

	// Exit 1: a changed cell body, with the file named, in text and JSON.
	cell := filepath.Join(sealed.Dir, "cells", "C01.sh")
	if err := os.WriteFile(cell, []byte("echo tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "verify", "--bundle", sealed.Dir, "--key", pub)
	if code != ExitMismatch || !strings.Contains(stderr, "cells/C01.sh") {
		t.Errorf("verify of a tampered bundle: exit %d, %s", code, stderr)
	}
	code, stdout, _ = run(t, "verify", "--json", "--bundle", sealed.Dir, "--key", pub)
	var failed struct {
		ExitCode int
		Problems []struct{ Path, Kind string }
	}
	if err := json.Unmarshal([]byte(stdout), &failed); err != nil || code != ExitMismatch || failed.ExitCode != ExitMismatch ||
		len(failed.Problems) == 0 || failed.Problems[0].Path != "cells/C01.sh" {
		t.Errorf("verify --json of a tampered bundle: exit %d, %q, %v", code, stdout, err)
	}
}

// treeDigests maps every file under dir to its SHA-256.
func treeDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fileDigest(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fileDigest(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func TestHelpShowsExamplesAndExitCodes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"seal", "--help"}, {"verify", "--help"}, {"keygen", "--help"}, {"run", "--help"}, {"report", "--help"}} {
		code, stdout, _ := run(t, args...)
		if code != ExitOK || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "Exit codes:") {
			t.Errorf("%v: exit %d, help lacks examples or exit codes:\n%s", args, code, stdout)
		}
	}
}

func TestKeygenNeedsPasswordWithoutTerminal(t *testing.T) {
	if term.IsTerminal(int(os.Stdin.Fd())) {
		t.Skip("stdin is a terminal here, so keygen would ask for the password")
	}
	t.Setenv("SEALBENCH_PASSWORD", "")
	os.Unsetenv("SEALBENCH_PASSWORD")
	code, _, stderr := run(t, "keygen", "--out", t.TempDir())
	if code != ExitUnusable || !strings.Contains(stderr, "SEALBENCH_PASSWORD") {
		t.Errorf("keygen with no password and no terminal: exit %d, %s", code, stderr)
	}
}
