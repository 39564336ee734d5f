package orchestrate

import (
	"strings"
	"testing"

	"github.com/sealbench/sealbench/engine"
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
	state, err := setupFUSEURing(run, true, []string{"lima"}, "", logf)
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
	// Without --fuse-uring, nothing is recorded either; the state is read.
	if _, err := setupFUSEURing(run, false, []string{"local", "docker"}, "", logf); err != nil || len(run.Ledger.Entries()) != 1 {
		t.Errorf("without --fuse-uring: %v, %+v", err, run.Ledger.Entries())
	}
}
