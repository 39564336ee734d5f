//go:build !sealbench_bundle

package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
)

// signedRun copies the report package's fixed run into a new directory,
// with every "from" replaced by "to" in both files, and signs it with
// signer as `run --sign-key` does.
func signedRun(t *testing.T, signer *sign.Signer, from, to string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{manifests.SamplesFile, manifests.PinsFile} {
		b, err := os.ReadFile(filepath.Join(reportRun, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), bytes.ReplaceAll(b, []byte(from), []byte(to)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if signer != nil {
		if _, err := orchestrate.SignResults(dir, signer, manifests.DigestOf([]byte("manifest")), attest.Audit{Verdict: attest.AuditClean}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadKeys(t *testing.T, dir string) (*sign.Signer, string) {
	t.Helper()
	s, err := sign.LoadPrivateKey(filepath.Join(dir, sign.PrivateKeyFile), []byte(testPassword))
	if err != nil {
		t.Fatal(err)
	}
	return s, filepath.Join(dir, sign.PublicKeyFile)
}

func editFile(t *testing.T, p string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReportRequireSigned is the tamper table: signed results verify with
// their key; an edited sample, a removed sample, a swapped pins.json and
// the results attestation of another run are refused as altered (exit 1),
// unsigned results and another key as untrusted (exit 2), each by
// `report --require-signed`; without it the report says which it found.
func TestReportRequireSigned(t *testing.T) {
	t.Setenv("SEALBENCH_PASSWORD", testPassword)
	keys, otherKeys := t.TempDir(), t.TempDir()
	for _, d := range []string{keys, otherKeys} {
		if code, _, stderr := run(t, "keygen", "--out", d); code != ExitOK {
			t.Fatalf("keygen: exit %d: %s", code, stderr)
		}
	}
	signer, pub := loadKeys(t, keys)
	otherSigner, _ := loadKeys(t, otherKeys)
	const runID = "run-20261130T100000Z"

	good := signedRun(t, signer, runID, runID)
	code, stdout, stderr := run(t, "report", good, "--key", pub, "--require-signed")
	if code != ExitOK || !strings.HasPrefix(stdout, "# sealbench report") {
		t.Fatalf("signed results: exit %d\n%s", code, stderr)
	}

	for _, tt := range []struct {
		name   string
		make   func() string
		code   int
		state  string
		stderr string
	}{
		{"an edited sample", func() string {
			d := signedRun(t, signer, runID, runID)
			editFile(t, filepath.Join(d, manifests.SamplesFile), func(b []byte) []byte {
				// A faster command, consistently so: the sample still parses.
				b = bytes.Replace(b, []byte(`"commandNs":26808800,"execWallNs":30808800`), []byte(`"commandNs":16808800,"execWallNs":20808800`), 1)
				return b
			})
			return d
		}, ExitMismatch, "invalid", "samples.jsonl: is "},
		{"a removed sample", func() string {
			d := signedRun(t, signer, runID, runID)
			editFile(t, filepath.Join(d, manifests.SamplesFile), func(b []byte) []byte {
				lines := bytes.SplitAfter(b, []byte("\n"))
				return bytes.Join(append(lines[:3], lines[4:]...), nil)
			})
			return d
		}, ExitMismatch, "invalid", "samples.jsonl: is "},
		{"a swapped pins.json", func() string {
			d := signedRun(t, signer, runID, runID)
			other := signedRun(t, nil, "6.1.0-40-amd64", "6.1.0-41-amd64")
			b, _ := os.ReadFile(filepath.Join(other, manifests.PinsFile))
			os.WriteFile(filepath.Join(d, manifests.PinsFile), b, 0o644)
			return d
		}, ExitMismatch, "invalid", "pins.json: is "},
		{"the results attestation of another run", func() string {
			d := signedRun(t, signer, runID, runID)
			other := signedRun(t, signer, runID, "run-20261130T110000Z")
			b, _ := os.ReadFile(filepath.Join(other, attest.ResultsFile))
			os.WriteFile(filepath.Join(d, attest.ResultsFile), b, 0o644)
			return d
		}, ExitMismatch, "invalid", "the attestation is of run run-20261130T110000Z"},
		{"another key", func() string { return signedRun(t, otherSigner, runID, runID) }, ExitSignature, "invalid", "does not verify"},
		{"no attestation", func() string { return signedRun(t, nil, runID, runID) }, ExitSignature, "unsigned", "not signed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.make()
			out := filepath.Join(t.TempDir(), "report.md")
			code, stdout, stderr := run(t, "report", d, "--key", pub, "--require-signed", "--out", out)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("report --require-signed: exit %d, want %d with %q:\n%s%s", code, tt.code, tt.stderr, stdout, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused report was written")
			}
			// Without --require-signed the report is made, and says it.
			code, stdout, stderr = run(t, "report", d, "--key", pub, "--format", "json")
			if code != ExitOK {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			if got := reportSignature(t, stdout); got.State != tt.state || got.Detail == "" {
				t.Errorf("report's signature: %+v, want state %s", got, tt.state)
			}
		})
	}

	// Verified, with the key named in full; unchecked without a key.
	_, stdout, _ = run(t, "report", good, "--key", pub, "--format", "json")
	v, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if got := reportSignature(t, stdout); got.State != "verified" || got.Key != v.KeyDigest() || len(got.Key) != len("sha256:")+64 {
		t.Errorf("signed results: %+v, want verified by %s", got, v.KeyDigest())
	}
	_, stdout, _ = run(t, "report", good, "--format", "json")
	if got := reportSignature(t, stdout); got.State != "unchecked" || got.Key != v.KeyDigest() {
		t.Errorf("signed results, no key: %+v", got)
	}
	// --require-signed needs --key; a private key is not a public one.
	if code, _, stderr := run(t, "report", good, "--require-signed"); code != ExitUnusable || !strings.Contains(stderr, "needs --key") {
		t.Errorf("--require-signed without --key: exit %d: %s", code, stderr)
	}
	if code, _, _ := run(t, "report", good, "--key", filepath.Join(keys, sign.PrivateKeyFile)); code != ExitUnusable {
		t.Errorf("a private key as --key: exit %d", code)
	}
}

type sigState struct{ State, Key, Detail string }

func reportSignature(t *testing.T, stdout string) sigState {
	t.Helper()
	var r struct {
		Runs []struct{ Signature *sigState }
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || len(r.Runs) != 1 || r.Runs[0].Signature == nil {
		t.Fatalf("report --format json: %v, %.300s", err, stdout)
	}
	return *r.Runs[0].Signature
}
