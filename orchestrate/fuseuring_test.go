package orchestrate

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// TestFUSEURingPins: a target on this host's kernel pins what enable_uring
// read; one on a kernel of its own (a VM's guest; a dockerd whose kernel is
// not this host's) pins n/a, whatever the host's parameter says.
func TestFUSEURingPins(t *testing.T) {
	here := runs.HostKernel()
	for _, c := range []struct {
		name   string
		host   bool
		kernel string
		want   string
	}{
		{"local", true, here, manifests.FUSEURingOn},
		{"docker elsewhere", true, here + "-other", manifests.FUSEURingNA},
		{"lima", false, "6.1.0-41-cloud-amd64", manifests.FUSEURingNA},
		{"lima on the same release", false, here, manifests.FUSEURingNA},
	} {
		id := &engine.Identity{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "t", Kernel: c.kernel}}}
		pinFUSEURing(id, c.host, manifests.FUSEURingOn)
		if id.FUSEURing != c.want {
			t.Errorf("%s: pinned %q, want %q", c.name, id.FUSEURing, c.want)
		}
		if got := id.Pins().FUSEURing; got != c.want {
			t.Errorf("%s: Pins carries %q", c.name, got)
		}
		if got := engine.IdentityOf(id.Plan()).FUSEURing; got != c.want {
			t.Errorf("%s: the plan carries %q to the runner", c.name, got)
		}
	}
	if !onHostKernel("local", "") || !onHostKernel("docker", "") || onHostKernel("lima", "") || onHostKernel("apple", "") {
		t.Error("local and docker run on this host's kernel; lima and apple on their own")
	}
	if !onHostKernel("", "unix:///run/docker.sock") || onHostKernel("", "tcp://10.0.0.2:2375") {
		t.Error("with --engine, a unix socket is this host's")
	}
}

// TestFUSEURingNotApplicable: --fuse-uring for targets on kernels of their
// own is not refused and changes nothing: the run says so and records no
// change. (Changing the real parameter is TestProvisionFUSEURing's, in
// cmd/sealbench/cmd, alone.)
func TestFUSEURingNotApplicable(t *testing.T) {
	if err := CheckFUSEURing([]string{"lima", "apple"}, ""); err != nil {
		t.Errorf("refused for VM targets only: %v", err)
	}
	run, err := runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, f) }
	before, _ := runs.ReadKernelParam(runs.FUSEURingParam)
	state, err := setupFUSEURing(run, FUSEURingOn, []string{"lima"}, "", logf)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := runs.ReadKernelParam(runs.FUSEURingParam)
	if before != after || len(run.Ledger.Entries()) != 1 {
		t.Errorf("changed %q to %q, or recorded it: %+v", before, after, run.Ledger.Entries())
	}
	if state != manifests.FUSEURingOn && state != manifests.FUSEURingOff {
		t.Errorf("host state %q", state)
	}
	if all := strings.Join(logged, "\n"); !strings.Contains(all, "a kernel of their own") || !strings.Contains(all, "left as it is") {
		t.Errorf("not said:\n%s", all)
	}
	// Auto with only such targets says nothing more and records nothing.
	logged = nil
	if _, err := setupFUSEURing(run, FUSEURingAuto, []string{"lima"}, "", logf); err != nil || len(run.Ledger.Entries()) != 1 || len(logged) != 0 {
		t.Errorf("auto for lima: %v, %+v, said %q", err, run.Ledger.Entries(), logged)
	}
	// Off records nothing, and pins off whatever the parameter reads: the
	// runner then serves LayerFS over /dev/fuse.
	if state, err := setupFUSEURing(run, FUSEURingOff, []string{"local", "docker"}, "", logf); err != nil || len(run.Ledger.Entries()) != 1 || state != manifests.FUSEURingOff {
		t.Errorf("--fuse-uring=off: pinned %q, %v, %+v", state, err, run.Ledger.Entries())
	}
}

// TestFUSEURingAuto: the default turns enable_uring on for a target on
// this host's kernel (as root, where the kernel has it), recorded first,
// and teardown puts it back; on a kernel without it, auto says so and
// goes on over /dev/fuse, where on refuses.
func TestFUSEURingAuto(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("auto turns enable_uring on only as root; as another user it goes on as it is (not tested here)")
	}
	read := testenv.FakeKernelParam(t, runs.FUSEURingParam, "N")
	run, err := runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	logf := func(f string, a ...any) { fmt.Fprintf(&logged, f+"\n", a...) }
	state, err := setupFUSEURing(run, FUSEURingAuto, []string{"local", "lima"}, "", logf)
	if err != nil || state != manifests.FUSEURingOn || read() != "Y" {
		t.Fatalf("auto: pinned %q, %v; reads %s", state, err, read())
	}
	es := run.Ledger.Entries()
	if e := es[len(es)-1]; e.Kind != manifests.ResourceKernelParam || e.Previous != "N" || !strings.Contains(e.Detail, "--fuse-uring=auto") {
		t.Errorf("ledger entry %+v", e)
	}
	if !strings.Contains(logged.String(), "on for local (it was N") || !strings.Contains(logged.String(), "lima run on a kernel of their own") {
		t.Errorf("not said:\n%s", logged.String())
	}
	run.Close()
	if _, err := runs.Teardown(context.Background(), run.Dir, runs.TeardownOptions{}); err != nil || read() != "N" {
		t.Fatalf("teardown: %v; reads %s, want N", err, read())
	}

	testenv.FakeKernelParam(t, runs.FUSEURingParam, "")
	run, err = runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	logged.Reset()
	state, err = setupFUSEURing(run, FUSEURingAuto, []string{"local"}, "", logf)
	if err != nil || state != manifests.FUSEURingOff || len(run.Ledger.Entries()) != 1 || !strings.Contains(logged.String(), "has none") {
		t.Errorf("auto on a kernel without it: pinned %q, %v, %+v, said %q", state, err, run.Ledger.Entries(), logged.String())
	}
	if _, err := setupFUSEURing(run, FUSEURingOn, []string{"local"}, "", logf); err == nil || !strings.Contains(err.Error(), "no FUSE over io_uring") {
		t.Errorf("on, on a kernel without it: %v", err)
	}
}

func TestParseFUSEURing(t *testing.T) {
	for _, v := range FUSEURingValues {
		m, err := ParseFUSEURing(v)
		if err != nil || m.String() != v {
			t.Errorf("%s: %v, %v", v, m, err)
		}
	}
	if m, err := ParseFUSEURing("true"); err != nil || m != FUSEURingOn {
		t.Errorf("true: %v, %v", m, err)
	}
	if _, err := ParseFUSEURing("sometimes"); err == nil || !strings.Contains(err.Error(), "auto, on, off") {
		t.Errorf("sometimes: %v", err)
	}
}
