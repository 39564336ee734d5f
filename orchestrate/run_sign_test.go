package orchestrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/report"
)

// fixtureRun copies the report package's fixed run into a new directory.
func fixtureRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{manifests.SamplesFile, manifests.PinsFile} {
		b, err := os.ReadFile(filepath.Join("..", "runner", "report", "testdata", "run", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSignRun: a run with a signing key signs its results after the
// audit, whatever the run's error, recording the audit's verdict, the run,
// the bundle and the counts; report.md is written again; the results then
// check as verified with the signer's public key.
func TestSignRun(t *testing.T) {
	k := newTestKeys(t)
	dir := fixtureRun(t)
	md := manifests.DigestOf([]byte("a manifest"))
	o := RunOptions{SignKey: k.signer, Bundle: &Bundle{Verified: &bundle.VerifyResult{ManifestDigest: md}}}
	outcome := &RunOutcome{Run: "run-20261130T100000Z", Dir: dir, Audit: attest.Audit{Verdict: attest.AuditLeftovers, Leftovers: 2}}
	runErr := &cliutil.UserError{Code: ExitMismatch, Err: errors.New("the audit found 2 leftovers")}
	if err := signRun(o, outcome, runErr, t.Logf); err != runErr {
		t.Fatalf("signRun returned %v, not the run's own error", err)
	}
	if outcome.Attestation != filepath.Join(dir, attest.ResultsFile) {
		t.Errorf("outcome names %q", outcome.Attestation)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
		t.Errorf("report.md was not written after signing: %v", err)
	}
	b, err := os.ReadFile(outcome.Attestation)
	if err != nil {
		t.Fatal(err)
	}
	st, err := k.verifier.VerifyAttestation(b)
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := os.ReadFile(filepath.Join(dir, manifests.SamplesFile))
	pins, _ := os.ReadFile(filepath.Join(dir, manifests.PinsFile))
	r, problems := attest.CheckResults(st, manifests.DigestOf(samples), manifests.DigestOf(pins), "run-20261130T100000Z")
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if r.Audit.Verdict != attest.AuditLeftovers || r.Audit.Leftovers != 2 || r.ManifestDigest != md.String() ||
		r.BundleID != "build-linux-bb5f636a0c1d" || r.Samples != 108 || len(r.Targets) != 3 || r.Seed == "" || r.SamplesPerCell == 0 {
		t.Errorf("the predicate: %+v", r)
	}

	inputs, err := report.Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := CheckInput(&inputs[0], k.verifier)
	if err != nil || sig.State != report.SignatureVerified || sig.Key != k.verifier.KeyDigest() {
		t.Errorf("the signed run checks as %+v, %v", sig, err)
	}

	// No key: nothing signed, and the report is told the run is unsigned.
	dir2 := fixtureRun(t)
	if err := signRun(RunOptions{}, &RunOutcome{Dir: dir2}, nil, t.Logf); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir2, attest.ResultsFile)); err == nil {
		t.Error("a run without a key was signed")
	}
	in := &report.Input{}
	unsignedYet(nil)(in)
	if in.Signature == nil || in.Signature.State != report.SignatureUnsigned || !strings.Contains(in.Signature.Detail, "--sign-key") {
		t.Errorf("an unsigned run's report is told %+v", in.Signature)
	}
	if unsignedYet(k.signer) != nil {
		t.Error("a run with a key is called unsigned before it is signed")
	}
}
