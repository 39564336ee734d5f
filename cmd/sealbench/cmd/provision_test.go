//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestProvisionTeardownAuditCLI drives the real commands end to end on
// the local target: provision leaves the stand-in up, audit sees it (exit
// 1), teardown takes it down (twice: the second finds nothing), and audit
// then finds nothing (exit 0).
func TestProvisionTeardownAuditCLI(t *testing.T) {
	testenv.NeedRoot(t)
	b := provisiontest.GetBundle(t)
	shortStateDir(t) // the stand-in's socket lives under it

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
	t.Setenv(runs.StateDirEnv, state)
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
		{[]string{"audit", "--target", "docker,docker"}, ExitUnusable, "named twice"},
		{[]string{"audit", "--target", "apple@ssh://root@mac1"}, ExitUnusable, "apple cannot run on a remote host"},
		{[]string{"audit", "--kubeconfig", filepath.Join(state, "absent")}, ExitUnusable, "--kubeconfig"},
		{[]string{"provision", "kubernetes@ssh://root@h", "--bundle", "x"}, ExitUnusable, "kubernetes cannot run on a remote host"},
		{[]string{"teardown", "--all", "--target", "vmware"}, ExitUnusable, `no target named "vmware"`},
		{[]string{"teardown", "--all", "--target", "docker@ssh://root@h:0"}, ExitUnusable, "1 to 65535"},
		{[]string{"teardown", "--all", "--ssh-known-hosts", filepath.Join(state, "absent")}, ExitUnusable, "--ssh-known-hosts"},
		{[]string{"doctor", "--target", "docker@http://h"}, ExitUnusable, "over ssh:// only"},
		{[]string{"doctor", "--target", "vmware"}, ExitUnusable, `no target named "vmware"`},
		{[]string{"doctor", "--target", "docker=local@ssh://root@h"}, ExitUnusable, "is a target kind's"},
	} {
		code, stdout, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s%s", c.args, code, c.code, c.want, stdout, stderr)
		}
	}
	if ids, _ := runs.ListRuns(state); len(ids) != 0 {
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

// fuseURingCrashEnv makes TestProvisionFUSEURing, in a child process of
// itself, the provision that crashes: it names the bundle (dir, key, name,
// separated by newlines) to provision from.
const fuseURingCrashEnv = "SEALBENCH_TEST_FUSE_URING_CRASH"

// TestProvisionFUSEURing is the one test of sealbench's own code that
// changes the real enable_uring (kernel-wide): under the machine-wide
// lock that layerfs's and layerfs/uring's tests take for their io_uring
// mounts, once no sealbench run on the machine holds it, never in
// parallel with this package's other tests (which run with
// $SEALBENCH_FUSE_URING=off: TestMain), and it puts the value back as it
// found it. It starts from N, so that --fuse-uring makes a real change:
//   - provision local --fuse-uring records the change in the ledger
//     (what it was: N) before the target's resources, turns it on, and pins
//     "on"; the audit lists it while it is in effect; teardown puts N back
//     and the audit is clean;
//   - a provision --fuse-uring killed (SIGKILL) right after the change
//     leaves it in effect: the audit lists it, teardown puts N back;
//   - a run with the default (auto) serves its sample over io_uring and
//     puts N back (runFUSEURingAuto).
func TestProvisionFUSEURing(t *testing.T) {
	if spec := os.Getenv(fuseURingCrashEnv); spec != "" {
		provisionAndDie(t, strings.Split(spec, "\n"))
		return
	}
	testenv.NeedRoot(t)
	if _, err := os.Stat(runs.FUSEURingParam); err != nil {
		testenv.Skip(t, "kernel %s has no FUSE over io_uring: %v", runs.HostKernel(), err)
	}
	b := provisiontest.GetBundle(t)
	unlock, err := testenv.LockFUSEURingFree(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	param := func() string {
		v, err := runs.ReadKernelParam(runs.FUSEURingParam)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	setParam := func(v string) {
		if err := os.WriteFile(runs.FUSEURingParam, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	orig := param()
	defer setParam(orig) // deferred after unlock's defer: runs first, under the lock
	setParam("N")
	// audit audits the run id (one that still has a run directory), or,
	// with no id, every run of this test's state directory on this host.
	audit := func(id string) (code int, kinds []string, out string) {
		args := []string{"audit", "--json", "--target", "local"}
		if id != "" {
			args = []string{"audit", "--json", "--run", id}
		}
		code, stdout, stderr := run(t, args...)
		var a struct{ Leftovers []runs.Resource }
		if err := json.Unmarshal([]byte(stdout), &a); err != nil {
			t.Fatalf("audit --json printed %s%s: %v", stdout, stderr, err)
		}
		for _, r := range a.Leftovers {
			kinds = append(kinds, string(r.Kind))
		}
		return code, kinds, stdout
	}

	t.Run("provision", func(t *testing.T) {
		state := shortStateDir(t)
		code, stdout, stderr := run(t, "provision", "local", "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name, "--fuse-uring", "--json")
		if code != ExitOK {
			t.Fatalf("provision local --fuse-uring: exit %d\n%s\n%s", code, stdout, stderr)
		}
		var p struct {
			Run      string
			Identity struct{ FUSEURing string }
		}
		if err := json.Unmarshal([]byte(stdout), &p); err != nil || p.Identity.FUSEURing != manifests.FUSEURingOn {
			t.Fatalf("provision --json printed %s (%v), want identity.fuseURing %q", stdout, err, manifests.FUSEURingOn)
		}
		t.Cleanup(func() { run(t, "teardown", "--run", p.Run) })
		if v := param(); v != "Y" {
			t.Fatalf("enable_uring reads %s with the target up, want Y", v)
		}
		entries, _, err := ledger.Read(filepath.Join(runs.RunsDir(state), p.Run))
		if err != nil {
			t.Fatal(err)
		}
		change, first := -1, -1
		for i, e := range entries {
			switch {
			case e.Kind == manifests.ResourceKernelParam:
				change = i
				if e.Key != runs.FUSEURingParam || e.Value != "Y" || e.Previous != "N" || e.Target != "" {
					t.Errorf("ledger entry: %+v", e)
				}
			case e.Target == "local" && first < 0:
				first = i
			}
		}
		if change < 0 || first < 0 || change > first {
			t.Fatalf("the change is not recorded before the target's resources (entry %d, first of local %d):\n%+v", change, first, entries)
		}
		if code, kinds, out := audit(p.Run); code != ExitLeftovers || !slices.Contains(kinds, string(manifests.ResourceKernelParam)) {
			t.Errorf("audit with the target up: exit %d, want the change listed:\n%s", code, out)
		}
		if code, stdout, stderr := run(t, "teardown", "--run", p.Run); code != ExitOK {
			t.Fatalf("teardown: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if v := param(); v != "N" {
			t.Errorf("after teardown enable_uring reads %s, want N (as it was)", v)
		}
		if code, kinds, out := audit(""); code != ExitOK || len(kinds) != 0 {
			t.Errorf("audit after teardown: exit %d\n%s", code, out)
		}
	})

	t.Run("crash", func(t *testing.T) {
		state := shortStateDir(t)
		c := exec.Command(os.Args[0], "-test.run=^TestProvisionFUSEURing$", "-test.v")
		c.Env = append(os.Environ(), fuseURingCrashEnv+"="+strings.Join([]string{b.Dir, b.PubKey, b.Name}, "\n"))
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the provision was to die of SIGKILL: %v\n%s", err, out)
		}
		ids, err := runs.ListRuns(state)
		if err != nil || len(ids) != 1 {
			t.Fatalf("runs: %v %v\n%s", ids, err, out)
		}
		t.Cleanup(func() { run(t, "teardown", "--run", ids[0]) })
		if v := param(); v != "Y" {
			t.Fatalf("enable_uring reads %s after the crash, want Y (the change in effect)\n%s", v, out)
		}
		if code, kinds, out := audit(ids[0]); code != ExitLeftovers || !slices.Contains(kinds, string(manifests.ResourceKernelParam)) {
			t.Errorf("audit after the crash: exit %d, want the change listed:\n%s", code, out)
		}
		if code, stdout, stderr := run(t, "teardown", "--run", ids[0]); code != ExitOK {
			t.Fatalf("teardown: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if v := param(); v != "N" {
			t.Errorf("after teardown enable_uring reads %s, want N", v)
		}
		if code, kinds, out := audit(""); code != ExitOK || len(kinds) != 0 {
			t.Errorf("audit after teardown: exit %d\n%s", code, out)
		}
	})

	t.Run("run", func(t *testing.T) { runFUSEURingAuto(t, param) })
}

// runFUSEURingAuto is TestProvisionFUSEURing's run: with the default
// --fuse-uring (auto), as root on a kernel with FUSE over io_uring, from
// N, the run turns enable_uring on, serves LayerFS on local over io_uring
// (the pins and the sample say so), and puts N back.
func runFUSEURingAuto(t *testing.T, param func() string) {
	b := sealForRun(t) // sealed already by an earlier test, in a whole run of the package
	shortStateDir(t)
	t.Setenv(fuseURingEnv, "") // the default a user gets
	out := filepath.Join(t.TempDir(), "results")
	code, stdout, stderr := run(t, "run", "--target", "local", "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name,
		"--cells", "C01", "--samples", "1", "--out", out)
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "FUSE over io_uring: "+runs.FUSEURingParam+" on for local (it was N") {
		t.Errorf("the run does not say it turned enable_uring on:\n%s", stderr)
	}
	if v := param(); v != "N" {
		t.Errorf("after the run enable_uring reads %s, want N (as it was)", v)
	}
	pins, err := os.ReadFile(filepath.Join(out, "pins.json"))
	if err != nil || !strings.Contains(string(pins), `"fuseURing": "on"`) {
		t.Errorf("pins.json does not pin fuseURing on (%v):\n%s", err, pins)
	}
	samples, err := os.ReadFile(filepath.Join(out, "samples.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(samples), `"fuseTransport":"uring"`); n != 1 || strings.Contains(string(samples), `"fuseTransport":"dev"`) {
		t.Errorf("want the one sample served over io_uring:\n%s", samples)
	}
}

// provisionAndDie is TestProvisionFUSEURing's crashing child: it runs
// provision local --fuse-uring and kills itself with SIGKILL as soon as
// enable_uring reads Y, wherever the provision then is (the ledger has the
// change, by then, and whatever of the target was recorded).
func provisionAndDie(t *testing.T, spec []string) {
	if len(spec) != 3 {
		t.Fatalf("%s: %q", fuseURingCrashEnv, spec)
	}
	go func() {
		for {
			if v, _ := runs.ReadKernelParam(runs.FUSEURingParam); v == "Y" {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	code, stdout, stderr := run(t, "provision", "local", "--bundle", spec[0], "--key", spec[1], "--id", spec[2], "--fuse-uring")
	t.Logf("provision: exit %d\n%s\n%s", code, stdout, stderr)
	time.Sleep(time.Second) // the poll above sees Y by now, if it ever will
	t.Fatal("enable_uring never read Y")
}

// TestTeardownTarget takes down one target's resources of a run and
// leaves the other's, and the run directory, for a later teardown of the
// whole run.
func TestTeardownTarget(t *testing.T) {
	state := t.TempDir()
	t.Setenv(runs.StateDirEnv, state)
	r, err := runs.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"docker": filepath.Join(r.Dir, "docker"), "local": filepath.Join(r.Dir, "local")}
	for target, dir := range dirs {
		if err := r.Ledger.Record(manifests.LedgerEntry{Target: target, Kind: manifests.ResourceDir, Key: dir}); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	code, stdout, stderr := run(t, "teardown", "--run", r.ID, "--target", "docker")
	if code != ExitOK || !strings.Contains(stdout, "removed 1 resources of docker; the run directory stays") {
		t.Fatalf("teardown --target docker: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(dirs["docker"]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("docker's directory is still there: %v", err)
	}
	if _, err := os.Stat(dirs["local"]); err != nil {
		t.Errorf("local's directory went with docker's: %v", err)
	}
	// Safe to run twice (an absent resource counts as handled).
	if code, stdout, _ := run(t, "teardown", "--run", r.ID, "--target", "docker"); code != ExitOK {
		t.Errorf("second teardown --target docker: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat(dirs["local"]); err != nil {
		t.Errorf("local's directory went with a second teardown of docker: %v", err)
	}
	if code, stdout, stderr := run(t, "teardown", "--run", r.ID); code != ExitOK || !strings.Contains(stdout, "removed 3 resources") {
		t.Errorf("teardown of the rest: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(r.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run directory is still there: %v", err)
	}
}

// TestDoctorTargetOnARemoteHost: doctor --target looks at a fake host
// over SSH with the identity and known_hosts given, lists only the
// targets named, and exits 0 whatever it finds.
func TestDoctorTargetOnARemoteHost(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	spec := fmt.Sprintf("local@ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	code, stdout, stderr := run(t, "doctor", "--target", "docker,"+spec, "--ssh-identity", h.ClientKey, "--ssh-known-hosts", h.KnownHosts)
	host := fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	for _, want := range []string{"\non " + host + ":\n", "ok   ssh", "ok   root", "logged in as uid 0", "  docker ", "can run on " + host + " (needs [ssh linux root sha256sum fuse])", "ok   fuse"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor --target: no %q in:\n%s", want, stdout)
		}
	}
	if code != ExitOK || strings.Contains(stdout, "  lima ") {
		t.Errorf("doctor --target: exit %d, or a target not named is listed:\n%s%s", code, stdout, stderr)
	}
}

// TestTeardownReportsAnUnreachableHost: teardown of a run with a resource
// on a host that is down says which host, why, and what is left there,
// exits with the failure code and keeps the run; JSON carries the same.
func TestTeardownReportsAnUnreachableHost(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	state := t.TempDir()
	t.Setenv(runs.StateDirEnv, state)
	r, err := runs.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	if err := runs.RecordHost(r.Dir, runs.HostRecord{Host: host, KnownHosts: h.KnownHosts, Identity: h.ClientKey}); err != nil {
		t.Fatal(err)
	}
	remoteDir := filepath.Join(t.TempDir(), r.ID)
	if err := r.Ledger.Record(manifests.LedgerEntry{Target: "docker-h", Host: host, Kind: manifests.ResourceDir, Key: remoteDir}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.Mkdir(remoteDir, 0o700); err != nil {
		t.Fatal(err)
	}
	h.Stop()
	code, stdout, stderr := run(t, "teardown", "--run", r.ID)
	for _, want := range []string{"host " + host + " cannot be reached", "left there:\n  dir " + remoteDir + "\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
	}
	if code != ExitFailed || !strings.Contains(stderr, "teardown --run "+r.ID) {
		t.Errorf("exit %d, want %d and the command that finishes it:\n%s", code, ExitFailed, stderr)
	}
	code, stdout, _ = run(t, "teardown", "--run", r.ID, "--json")
	var doc struct {
		Runs []runs.TeardownResult `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != ExitFailed || len(doc.Runs) != 1 || len(doc.Runs[0].Unreachable) != 1 ||
		doc.Runs[0].Unreachable[0].Host != host || len(doc.Runs[0].Unreachable[0].Left) != 1 {
		t.Errorf("teardown --json: exit %d, %v:\n%s", code, err, stdout)
	}
	h.Restart()
	if code, stdout, stderr := run(t, "teardown", "--run", r.ID); code != ExitOK {
		t.Errorf("teardown with the host back: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(remoteDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's directory on the host is still there: %v", err)
	}
}

// TestProvisionOnADockerHostCLI: provision docker@ssh leaves it up and
// says DOCKER_HOST=ssh://... reaches it; audit --target with the spec asks
// that host and finds the image only through the run's ledger; teardown
// removes it over SSH, and the audit of the host then finds nothing.
func TestProvisionOnADockerHostCLI(t *testing.T) {
	sshtest.Need(t)
	endpoint := testenv.PrivateDockerd(t)
	h := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv("DOCKER_HOST", endpoint))
	b := provisiontest.GetBundle(t)
	shortStateDir(t) // the forward's socket lives under it
	host := fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	ssh := []string{"--ssh-identity", h.ClientKey, "--ssh-known-hosts", h.KnownHosts}
	code, stdout, stderr := run(t, append([]string{"provision", "h=docker@" + host, "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name}, ssh...)...)
	if code != ExitOK || !strings.Contains(stdout, "export DOCKER_HOST="+host+"\n") || !strings.Contains(stdout, "not\n  # --ssh-identity/--ssh-known-hosts") {
		t.Fatalf("provision h=docker@%s: exit %d\n%s\n%s", host, code, stdout, stderr)
	}
	_, rest, _ := strings.Cut(stdout, "(run ")
	id, _, _ := strings.Cut(rest, ")")
	code, stdout, _ = run(t, append([]string{"audit", "--target", "h=docker@" + host}, ssh...)...)
	if code != ExitLeftovers || !strings.Contains(stdout, "image "+b.Image.ID.String()+" on "+host) {
		t.Errorf("audit --target h=docker@%s with it up: exit %d\n%s", host, code, stdout)
	}
	if code, stdout, stderr = run(t, "teardown", "--run", id); code != ExitOK {
		t.Fatalf("teardown --run %s: exit %d\n%s\n%s", id, code, stdout, stderr)
	}
	code, stdout, stderr = run(t, append([]string{"audit", "--target", "h=docker@" + host, "--json"}, ssh...)...)
	var a struct{ Leftovers []any }
	if code != ExitOK || json.Unmarshal([]byte(stdout), &a) != nil || len(a.Leftovers) != 0 {
		t.Errorf("audit of the host after teardown: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestProvisionOnALocalHostCLI: `provision local@ssh://...` leaves the
// bundle's stand-in up on a fake host and prints the ssh command that
// forwards its socket; that command (the system ssh, given the test's
// key and known_hosts) makes the printed endpoint answer, with the
// image loaded; `teardown --run` then stops the stand-in and removes
// everything on the host, and the audit finds nothing.
func TestProvisionOnALocalHostCLI(t *testing.T) {
	sshtest.Need(t)
	sshCmd := testenv.NeedCommand(t, "ssh")
	hostState := testenv.ShortTempDir(t, "sbh-")
	h := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv(runs.StateDirEnv, hostState))
	b := provisiontest.GetBundle(t)
	shortStateDir(t) // the forward's socket lives under it
	spec := fmt.Sprintf("h=local@ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	ssh := []string{"--ssh-identity", h.ClientKey, "--ssh-known-hosts", h.KnownHosts}
	code, stdout, stderr := run(t, append([]string{"provision", spec, "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name, "--json"}, ssh...)...)
	var out struct {
		Run, Endpoint, Host, Forward string
	}
	if code != ExitOK || json.Unmarshal([]byte(stdout), &out) != nil || !strings.HasPrefix(out.Forward, "ssh ") || !strings.HasPrefix(out.Endpoint, "unix://") {
		t.Fatalf("provision %s: exit %d\n%s\n%s", spec, code, stdout, stderr)
	}
	// The printed command, with the test's key and known_hosts in place
	// of the user's.
	opts := []string{"-i", h.ClientKey, "-o", "IdentitiesOnly=yes", "-o", "UserKnownHostsFile=" + h.KnownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"}
	provisiontest.ForwardAnswers(t, sshCmd, opts, out.Forward, out.Endpoint, b.Image.ID.String(), out.Host)
	if code, stdout, stderr = run(t, "teardown", "--run", out.Run); code != ExitOK {
		t.Fatalf("teardown --run %s: exit %d\n%s\n%s", out.Run, code, stdout, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(hostState, "remote", "*")); len(left) > 0 {
		t.Errorf("the host still holds %v", left)
	}
	auditNothingLeft(t, ssh...)
}
