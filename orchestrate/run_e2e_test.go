package orchestrate_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runner/report"
)

func TestMain(m *testing.M) { provisiontest.Main(m) }

// TestRunOnLocalWithoutCobra drives a run through the library, as the
// command does: open the bundle (verified once), bring local up, load the
// image, hand the sampling to the bundle's own runner, then tear down and
// audit. The test bundle's image is busybox and it ships no layerfsd, so
// the one sample fails at its first LayerFS step (make test's run tests
// sample for real): the runner still recorded and removed its Sandbox, the
// pins carry the digest of the runner that ran, and nothing is left.
func TestRunOnLocalWithoutCobra(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
	b := provisiontest.GetRunnerBundle(t)
	ctx := context.Background()
	opened := openBundle(t, b)
	if opened.Image.ID != b.Image.ID {
		t.Fatalf("OpenBundle found image %s, the bundle's is %s", opened.Image.ID, b.Image.ID)
	}
	out := t.TempDir()
	keys := t.TempDir()
	priv, pub, err := sign.WriteKeyPair(keys, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadPrivateKey(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{Bundle: opened, Targets: []string{"local"}, Cells: []string{"C01"}, Samples: 1, Seed: 1,
		Out: out, StateDir: testenv.ShortTempDir(t, "sbh-"), Log: t.Logf, SignKey: signer})
	var ue *cliutil.UserError
	if !errors.As(err, &ue) || ue.Code != orchestrate.ExitMismatch || !strings.Contains(err.Error(), "1 of 1 samples failed") {
		t.Fatalf("Run: %v, want the failed sample reported (exit %d)", err, orchestrate.ExitMismatch)
	}
	if o == nil || o.Samples != 1 || o.Failed != 1 || o.Kept || len(o.Leftovers) != 0 || o.Teardown == nil || o.Targets["local"] == nil {
		t.Fatalf("outcome %+v: want one failed sample, then torn down with nothing left", o)
	}
	if !strings.Contains(strings.Join(o.Teardown.Removed, "\n"), "container ") {
		t.Errorf("teardown removed %q: the runner's Sandbox was not in the ledger", o.Teardown.Removed)
	}
	pins := readPins(t, out)
	want, _ := opened.Verified.Manifest.File(bundle.RunnerPath("linux", runtime.GOARCH))
	if pins.RunnerSHA256 != want.Digest || pins.RunnerPlatform != "linux/"+runtime.GOARCH {
		t.Errorf("pins: runner %s on %s, the manifest's runner is %s", pins.RunnerSHA256, pins.RunnerPlatform, want.Digest)
	}
	// Signed after the audit, which found nothing: the results check.
	if o.Audit.Verdict != attest.AuditClean || o.Attestation != filepath.Join(out, attest.ResultsFile) {
		t.Errorf("outcome: audit %+v, attestation %q", o.Audit, o.Attestation)
	}
	v, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := report.Load([]string{out})
	if err != nil {
		t.Fatal(err)
	}
	if sig, err := orchestrate.CheckInput(&inputs[0], v); err != nil || sig.State != report.SignatureVerified {
		t.Errorf("the run's signed results check as %+v: %v", sig, err)
	}
}

// TestRunRefusesARunnerChangedAfterVerification: the runner's bytes are
// checked against the verified manifest as they are copied, so a runner
// that changed after the bundle was verified is refused before any
// sample: no Sandbox, no samples, and the run torn down all the same.
func TestRunRefusesARunnerChangedAfterVerification(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
	shared := provisiontest.GetRunnerBundle(t)
	dir := filepath.Join(t.TempDir(), filepath.Base(shared.Dir))
	if out, err := exec.Command("cp", "-a", shared.Dir, dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the bundle: %v\n%s", err, out)
	}
	if out, err := exec.Command("cp", "-a", shared.Dir+".image", dir+".image").CombinedOutput(); err != nil {
		t.Fatalf("copying the image: %v\n%s", err, out)
	}
	ctx := context.Background()
	opened, err := orchestrate.OpenBundle(ctx, orchestrate.BundleOptions{Dir: dir, Key: shared.PubKey, Expect: shared.Name, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	runner := filepath.Join(dir, filepath.FromSlash(bundle.RunnerPath("linux", runtime.GOARCH)))
	if err := os.WriteFile(runner, []byte("#!/bin/sh\necho not the runner\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{Bundle: opened, Targets: []string{"local"}, Cells: []string{"C01"}, Samples: 1, Seed: 1,
		Out: out, StateDir: testenv.ShortTempDir(t, "sbh-"), Log: t.Logf})
	var ue *cliutil.UserError
	if !errors.As(err, &ue) || ue.Code != orchestrate.ExitMismatch || !strings.Contains(err.Error(), "is not the file that was verified") {
		t.Fatalf("Run: %v, want the changed runner refused (exit %d)", err, orchestrate.ExitMismatch)
	}
	if o == nil || o.Samples != 0 || len(o.Leftovers) != 0 || o.Teardown == nil {
		t.Fatalf("outcome %+v: want no sample, torn down, nothing left", o)
	}
	if strings.Contains(strings.Join(o.Teardown.Removed, "\n"), "container ") {
		t.Errorf("teardown removed %q: a Sandbox was made for a refused runner", o.Teardown.Removed)
	}
	if _, err := os.Stat(filepath.Join(out, manifests.SamplesFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("samples.jsonl exists after a refused runner: %v", err)
	}
}

// openBundle opens the test bundle b as the commands do: its signature
// checked with its key, its name the one expected.
func openBundle(t *testing.T, b *provisiontest.Bundle) *orchestrate.Bundle {
	t.Helper()
	opened, err := orchestrate.OpenBundle(context.Background(), orchestrate.BundleOptions{Dir: b.Dir, Key: b.PubKey, Expect: b.Name, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return opened
}

func readPins(t *testing.T, dir string) *manifests.RunPins {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, manifests.PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := manifests.ReadRunPins(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
