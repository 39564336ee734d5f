//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	_ "github.com/sealbench/sealbench/provision/provisiontest/testtarget" // a target of a test package's own
)

// TestATargetIsOnePackage: a target registered by a package of its own
// (provision/provisiontest/testtarget), which nothing but this test imports, gets
// everything a target gets: its place in the help and its flag on run
// and provision, its flag checked before anything is made, its hidden
// command, and a whole run, report, teardown and audit under its name.
func TestATargetIsOnePackage(t *testing.T) {
	code, stdout, _ := run(t, "run", "--help")
	if code != ExitOK || !strings.Contains(stdout, "  testtarget\n           a test-only target: the dockerd you have") || !strings.Contains(stdout, "--testtarget-label") {
		t.Errorf("run --help lacks the test-only target or its flag:\n%s", stdout)
	}
	if code, stdout, _ := run(t, "audit", "--help"); code != ExitOK || strings.Contains(stdout, "--testtarget-label") {
		t.Errorf("audit takes the target's run flag:\n%s", stdout)
	}
	if code, _, stderr := run(t, "testtarget-echo", "hello", "there"); code != ExitOK || !strings.Contains(stderr, "hello there") {
		t.Errorf("the target's hidden command: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "testtarget-echo"); code != ExitUnusable || !strings.Contains(stderr, "needs words") {
		t.Errorf("the hidden command's usage error: exit %d\n%s", code, stderr)
	}
	code, _, stderr := run(t, "run", "--target", "testtarget", "--testtarget-label", "two words", "--cells", "C01")
	if code != ExitUnusable || !strings.Contains(stderr, "--testtarget-label") || !strings.Contains(stderr, "hint: --testtarget-label takes one word") {
		t.Errorf("a bad value of the target's flag: exit %d, want %d naming it\n%s", code, ExitUnusable, stderr)
	}

	b := sealForRun(t)
	testenv.NeedDocker(t)
	shortStateDir(t)
	out := t.TempDir()
	code, stdout, stderr = run(t, "run", "--json", "--target", "testtarget", "--testtarget-label", "probe", "--bundle", b.Dir, "--key", b.PubKey,
		"--id", b.Name, "--cells", "C01", "--samples", "1", "--out", out)
	var o orchestrate.RunOutcome
	if err := json.Unmarshal([]byte(stdout), &o); code != ExitOK || err != nil || o.Samples != 1 || o.Failed != 0 || len(o.Leftovers) != 0 {
		t.Fatalf("run on the test-only target: exit %d, %v, %+v\n%s", code, err, o, stderr)
	}
	if !strings.Contains(stderr, "testtarget: label probe") {
		t.Errorf("the target's option did not reach it:\n%.3000s", stderr)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(out, manifests.SamplesFile))
	if err != nil || len(samples) != 1 || samples[0].Target != "testtarget" || samples[0].Status != manifests.StatusOK {
		t.Errorf("samples: %v %+v", err, samples)
	}
	auditNothingLeft(t)
}
