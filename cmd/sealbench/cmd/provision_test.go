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
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
)

// TestProvisionTeardownAuditCLI drives the real commands end to end on
// the local target: provision leaves the stand-in up, audit sees it (exit
// 1), teardown takes it down (twice: the second finds nothing), and audit
// then finds nothing (exit 0).
func TestProvisionTeardownAuditCLI(t *testing.T) {
	testenv.NeedRoot(t)
	b := provisiontest.GetBundle(t)
	state, err := os.MkdirTemp("", "sbc-") // short: the stand-in's socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	t.Setenv(provision.StateDirEnv, state)

	code, stdout, stderr := run(t, "provision", "local", "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name, "--json")
	if code != ExitOK {
		t.Fatalf("provision local: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var p struct {
		Run, RunDir, Endpoint string
		Identity              struct {
			Engine, Kernel string
			CPUs           int
		}
		Image struct{ ID string }
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil || p.Run == "" || !strings.HasPrefix(p.Endpoint, "unix:///") ||
		p.Identity.Engine != manifests.EngineStandin || p.Identity.Kernel == "" || p.Identity.CPUs < 1 || p.Image.ID != b.Image.ID.String() {
		t.Fatalf("provision --json printed %s (%v)", stdout, err)
	}
	t.Cleanup(func() { run(t, "teardown", "--run", p.Run) })

	code, stdout, _ = run(t, "audit", "--target", "local")
	if code != ExitLeftovers || !strings.Contains(stdout, "process") || !strings.Contains(stdout, p.Run) {
		t.Errorf("audit with the target up: exit %d\n%s", code, stdout)
	}
	for i := range 2 {
		code, stdout, stderr = run(t, "teardown", "--run", p.Run)
		if code != ExitOK {
			t.Fatalf("teardown #%d: exit %d\n%s\n%s", i+1, code, stdout, stderr)
		}
	}
	if !strings.Contains(stdout, "nothing left") {
		t.Errorf("second teardown: %s", stdout)
	}
	code, stdout, stderr = run(t, "audit", "--target", "local", "--json")
	var a struct{ Leftovers []any }
	if code != ExitOK || json.Unmarshal([]byte(stdout), &a) != nil || len(a.Leftovers) != 0 {
		t.Errorf("audit after teardown: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(p.RunDir); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
}

// TestProvisionRefusesBadInput: each mistake is a usage error that says
// what to do next, and nothing is provisioned.
func TestProvisionRefusesBadInput(t *testing.T) {
	state := t.TempDir()
	t.Setenv(provision.StateDirEnv, state)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"provision", "apple"}, ExitUnusable, "--bundle"},
		{[]string{"provision", "microsandbox", "--bundle", filepath.Join(state, "missing"), "--key", filepath.Join(state, "no.pub")}, ExitSignature, "--key"},
		{[]string{"provision", "vmware", "--bundle", "x"}, ExitUnusable, `no target named "vmware"`},
		{[]string{"provision", "local"}, ExitUnusable, "--bundle"},
		{[]string{"provision", "local", "--bundle", "x", "--id", "nope"}, ExitUnusable, "bundle name"},
		{[]string{"provision", "local", "--bundle", filepath.Join(state, "missing"), "--key", filepath.Join(state, "no.pub")}, ExitSignature, "--key"},
		{[]string{"teardown"}, ExitUnusable, "--run ID"},
		{[]string{"teardown", "--run", "x", "--all"}, ExitUnusable, "exactly one"},
		{[]string{"teardown", "--run", "../etc"}, ExitUnusable, "run id"},
		{[]string{"audit", "--target", "vmware"}, ExitUnusable, `no target named "vmware"`},
	} {
		code, stdout, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s%s", c.args, code, c.code, c.want, stdout, stderr)
		}
	}
	if ids, _ := provision.ListRuns(state); len(ids) != 0 {
		t.Errorf("runs were started: %v", ids)
	}
	// A run that is not there is torn down already.
	if code, stdout, _ := run(t, "teardown", "--run", "20261129T000000-abcdef"); code != ExitOK || !strings.Contains(stdout, "nothing left") {
		t.Errorf("teardown of an absent run: exit %d %s", code, stdout)
	}
	if code, stdout, _ := run(t, "teardown", "--all", "--json"); code != ExitOK || !strings.Contains(stdout, `"runs"`) {
		t.Errorf("teardown --all on no runs: exit %d %s", code, stdout)
	}
}

func TestDoctorAlwaysExitsZero(t *testing.T) {
	code, stdout, stderr := run(t, "doctor", "--json")
	var r provision.DoctorReport
	if code != ExitOK || json.Unmarshal([]byte(stdout), &r) != nil || len(r.Checks) < 8 || len(r.Targets) < 5 {
		t.Fatalf("doctor --json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, c := range r.Checks {
		if !c.OK && c.Fix == "" {
			t.Errorf("check %s fails without saying what to do: %+v", c.Name, c)
		}
	}
	if code, stdout, _ := run(t, "doctor"); code != ExitOK || !strings.Contains(stdout, "targets:") {
		t.Errorf("doctor: exit %d\n%s", code, stdout)
	}
}

func TestProvisionHelpHasExamples(t *testing.T) {
	for _, c := range []string{"provision", "teardown", "audit", "doctor"} {
		code, stdout, _ := run(t, c, "--help")
		if code != ExitOK || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "sealbench "+c) {
			t.Errorf("%s --help: exit %d\n%s", c, code, stdout)
		}
	}
}
