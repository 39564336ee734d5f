//go:build !sealbench_bundle

package cmd

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

// TestPinnedIDRefusesAnotherBundle: `run` and `provision` with --id refuse
// a validly signed bundle that has another name (a rollback to an older
// bundle signed by the same key) with exit 2, before anything is made.
func TestPinnedIDRefusesAnotherBundle(t *testing.T) {
	b := provisiontest.GetBundle(t)
	state := shortStateDir(t)
	const other = "build-linux-000000000000"
	for _, args := range [][]string{
		{"run", "--target", "local", "--bundle", b.Dir, "--key", b.PubKey, "--id", other},
		{"run", "--target", "local,docker", "--bundle", b.Dir, "--key", b.PubKey, "--id", other, "--cells", "C01"},
		{"provision", "local", "--bundle", b.Dir, "--key", b.PubKey, "--id", other},
		{"provision", "docker", "--bundle", b.Dir, "--key", b.PubKey, "--id", other},
	} {
		code, stdout, stderr := run(t, args...)
		if code != ExitSignature || !strings.Contains(stderr, other) || !strings.Contains(stderr, b.Name) {
			t.Errorf("%s: exit %d, want %d naming the pinned %s and the bundle's %s\n%s%s", strings.Join(args, " "), code, ExitSignature, other, b.Name, stdout, stderr)
		}
	}
	if ents, err := os.ReadDir(runs.RunsDir(state)); len(ents) != 0 {
		t.Errorf("a refused bundle started runs: %v (%v)", ents, err)
	}
	// The control: pinned to its own name, the same bundle verifies.
	if code, stdout, stderr := run(t, "verify", "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name); code != ExitOK {
		t.Errorf("verify pinned to its own name: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestKeyErrorsAreClear: each way a key can be wrong is a usage error (exit
// 3) that says what is wrong, through the commands that read keys, and the
// password is never part of it.
func TestKeyErrorsAreClear(t *testing.T) {
	const pw = "key-errors-password-7f3a"
	t.Setenv("SEALBENCH_PASSWORD", pw)
	keys := t.TempDir()
	if code, _, stderr := run(t, "keygen", "--out", keys); code != ExitOK {
		t.Fatalf("keygen: exit %d: %s", code, stderr)
	}
	priv, pub := filepath.Join(keys, "sealbench.key"), filepath.Join(keys, "sealbench.pub")
	privPEM, err := os.ReadFile(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	plainPEM, _ := cryptoutils.MarshalPrivateKeyToPEM(ec)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaPubPEM, _ := cryptoutils.MarshalPublicKeyToPEM(rsaKey.Public())
	corrupted := bytes.Clone(privPEM)
	corrupted[len(corrupted)/2] ^= 0x01 // still PEM, no longer the key

	out := t.TempDir()
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"wrong password", pw + "-wrong", []string{"seal", "--key", priv}, "wrong password"},
		{"corrupted key file", pw, []string{"seal", "--key", write("corrupted.key", corrupted)}, "corrupted"},
		{"unencrypted private key", pw, []string{"seal", "--key", write("plain.key", plainPEM)}, "not encrypted"},
		{"a public key to sign", pw, []string{"seal", "--key", pub}, "public key"},
		{"an RSA public key", pw, []string{"verify", "--bundle", out, "--key", write("rsa.pub", rsaPubPEM)}, "RSA"},
		{"a private key to verify", pw, []string{"verify", "--bundle", out, "--key", priv}, "private key"},
		{"missing key", pw, []string{"seal", "--key", filepath.Join(dir, "absent.key")}, "absent.key"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			t.Setenv("SEALBENCH_PASSWORD", c.env)
			args := append(c.args, "--out", out)
			if c.args[0] == "verify" {
				args = c.args
			}
			code, stdout, stderr := run(t, args...)
			if code != ExitUnusable || !strings.Contains(stderr, c.want) {
				t.Errorf("%s: exit %d, want %d saying %q:\n%s%s", strings.Join(args, " "), code, ExitUnusable, c.want, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, pw) {
				t.Errorf("%s printed the password:\n%s%s", strings.Join(args, " "), stdout, stderr)
			}
		})
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("refused seals wrote %d entries to --out", len(ents))
	}
}

// TestPasswordNeverLeaks: with a distinctive SEALBENCH_PASSWORD, keygen,
// seal and a run over two cells that signs its results (torn down, as
// without --keep) print it
// nowhere and write it nowhere: not stdout, stderr, the bundle, the
// results or the state directory (ledger, logs).
func TestPasswordNeverLeaks(t *testing.T) {
	sealForRun(t) // the same requirements; and the Debian packages are fetched once
	var r [12]byte
	rand.Read(r[:])
	pw := "sealbench-leak-canary-" + hex.EncodeToString(r[:])
	t.Setenv("SEALBENCH_PASSWORD", pw)
	state := shortStateDir(t)
	keys, sealOut, results := t.TempDir(), t.TempDir(), t.TempDir()
	var printed []string
	step := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := run(t, args...)
		printed = append(printed, stdout, stderr)
		if code != ExitOK {
			t.Fatalf("%s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout, stderr)
		}
		return stdout
	}
	step("keygen", "--out", keys)
	var sealed struct{ Name, Dir string }
	if err := json.Unmarshal([]byte(step("seal", "--json", "--key", filepath.Join(keys, "sealbench.key"), "--out", sealOut, "--source", testenv.ModuleRoot(t))), &sealed); err != nil || sealed.Dir == "" {
		t.Fatalf("seal --json: %v", err)
	}
	step("run", "--target", "local", "--bundle", sealed.Dir, "--key", filepath.Join(keys, "sealbench.pub"),
		"--id", sealed.Name, "--cells", "C01,C06", "--seed", "1", "--out", results, "--sign-key", filepath.Join(keys, "sealbench.key"))
	if _, err := os.Stat(filepath.Join(results, "results.sigstore.json")); err != nil {
		t.Errorf("the run signed no results: %v", err)
	}
	// A wrong password, refused: neither it nor the right one is echoed.
	t.Setenv("SEALBENCH_PASSWORD", pw+"-wrong")
	code, stdout, stderr := run(t, "seal", "--key", filepath.Join(keys, "sealbench.key"), "--out", t.TempDir(), "--source", testenv.ModuleRoot(t))
	printed = append(printed, stdout, stderr)
	if code != ExitUnusable {
		t.Errorf("seal with a wrong password: exit %d, want %d", code, ExitUnusable)
	}

	for i, s := range printed {
		if strings.Contains(s, pw) {
			t.Errorf("the password is in the output of a command (#%d):\n%s", i, s)
		}
	}
	files := 0
	for _, dir := range []string{keys, sealOut, results, state} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("reading %s: %v", p, err)
				return nil
			}
			files++
			if bytes.Contains(b, []byte(pw)) {
				t.Errorf("the password is written in %s", p)
			}
			return nil
		})
	}
	if files < 4 {
		t.Errorf("only %d files to look in: the run wrote less than it should", files)
	}
}
