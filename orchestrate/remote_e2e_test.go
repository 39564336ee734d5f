package orchestrate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestRunOnADockerHostOverSSH runs on docker@ssh://: a fake host whose
// sessions' DOCKER_HOST is a dockerd of the test's own. As in
// TestRunOnLocalWithoutCobra the test bundle's one sample fails at its
// first LayerFS step; what is checked is the way there and back: the
// run connects once, records the host in hosts.json, loads the image
// there (recorded as the host's), installs the bundle's runner there and
// runs it with a plan of the host's targets, its Sandbox made and removed
// on the host's dockerd through the host's own socket, its samples and
// pins copied back (pins naming the host as where the runner ran),
// teardown removes the image and what the host's runner recorded over
// SSH, and the audit finds nothing, on the host either.
func TestRunOnADockerHostOverSSH(t *testing.T) {
	h, endpoint, opened, specs := dockerHostH1(t)
	ctx := context.Background()
	state := testenv.ShortTempDir(t, "sbh-")
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{Bundle: opened, Targets: orchestrate.Names(specs), Specs: map[string]remote.Spec{"h1": specs[0]},
		SSH: orchestrate.SSH{Identity: h.ClientKey, KnownHosts: h.KnownHosts}, Cells: []string{"C01"}, Samples: 1, Seed: 1,
		Out: t.TempDir(), StateDir: state, Log: t.Logf})
	var ue *cliutil.UserError
	if !errors.As(err, &ue) || ue.Code != orchestrate.ExitMismatch || !strings.Contains(err.Error(), "1 of 1 samples failed") {
		t.Fatalf("Run: %v, want the failed sample reported (exit %d)", err, orchestrate.ExitMismatch)
	}
	id := o.Targets["h1"]
	if id == nil || id.Transport != remote.TransportSSH || id.Host != specs[0].Host.String() || id.Engine != "dockerd" || o.Samples != 1 || len(o.Leftovers) != 0 || o.Kept {
		t.Fatalf("outcome %+v (h1: %+v): want one failed sample on h1 over ssh, torn down with nothing left", o, id)
	}
	removed := strings.Join(o.Teardown.Removed, "\n")
	hostName := specs[0].Host.String()
	// The runner pinned where h1 lives, and the report says so.
	pins, err := os.ReadFile(filepath.Join(o.Dir, manifests.PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := manifests.ReadRunPins(bytes.NewReader(pins)); err != nil || p.Targets[0].Host != hostName || p.Targets[0].RunnerHost != hostName || p.Targets[0].Transport != "socket" {
		t.Errorf("pins %s (%v): want h1 on %s sampled by a runner there, through the Engine's socket", pins, err, hostName)
	}
	if md, err := os.ReadFile(filepath.Join(o.Dir, "report.md")); err != nil || !strings.Contains(string(md), "| "+hostName+" | h1 |") {
		t.Errorf("report.md (%v) does not group h1 under %s:\n%s", err, hostName, md)
	}
	if !strings.Contains(removed, "container ") || !strings.Contains(removed, "image "+opened.Image.ID.String()+" on "+hostName) {
		t.Errorf("teardown removed %q: want the runner's Sandbox and the image on %s", o.Teardown.Removed, hostName)
	}
	cli, err := engine.NewClient(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if left, err := runs.Labelled(ctx, cli, "h1", o.Run); err != nil || len(left) != 0 {
		t.Errorf("the host's dockerd holds %v of the run (%v)", left, err)
	}
	if _, err := cli.ImageInspect(ctx, opened.Image.ID.String()); err == nil {
		t.Errorf("the image %s is still on the host's dockerd", opened.Image.ID)
	}
}

// TestRunOnLocalAndALocalHostOverSSH runs `--target
// local,local@ssh://USER@HOST:PORT`: the stand-in here and the bundle's
// stand-in copied to, checked on and started on a fake host, the first
// sampled by the runner here, the second by the bundle's runner installed
// on the host, both at once. As above, each target's one sample fails at
// its first LayerFS step; what is checked is the way there and back: both
// targets sampled, each by a runner beside its Engine, merged into one
// run's results, and teardown leaving nothing on the host.
func TestRunOnLocalAndALocalHostOverSSH(t *testing.T) {
	sshtest.Need(t)
	h, hostState := runnerHost(t)
	b := provisiontest.GetRunnerBundle(t)
	ctx := context.Background()
	opened := openBundle(t, b)
	specs, err := orchestrate.CheckTargets([]string{"local", fmt.Sprintf("local@ssh://%s@%s:%d", h.User, h.Addr, h.Port)})
	if err != nil {
		t.Fatal(err)
	}
	far := specs[1]
	if want := fmt.Sprintf("local-127-0-0-2-%d", h.Port); far.Name != want {
		t.Fatalf("the remote target is named %q, want %q", far.Name, want)
	}
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{Bundle: opened, Targets: orchestrate.Names(specs), Specs: map[string]remote.Spec{far.Name: far},
		SSH: orchestrate.SSH{Identity: h.ClientKey, KnownHosts: h.KnownHosts}, Cells: []string{"C01"}, Samples: 1, Seed: 1,
		Out: t.TempDir(), StateDir: testenv.ShortTempDir(t, "sbh-"), Log: t.Logf})
	var ue *cliutil.UserError
	if !errors.As(err, &ue) || ue.Code != orchestrate.ExitMismatch || !strings.Contains(err.Error(), "2 of 2 samples failed") {
		t.Fatalf("Run: %v, want both failed samples reported (exit %d)", err, orchestrate.ExitMismatch)
	}
	id := o.Targets[far.Name]
	if id == nil || id.Transport != remote.TransportSSH || id.Engine != manifests.EngineStandin || o.Samples != 2 || len(o.Leftovers) != 0 || o.Kept {
		t.Fatalf("outcome %+v (%s: %+v): want a sample on each target, the remote one's stand-in over ssh, torn down with nothing left", o, far.Name, id)
	}
	checkRunners(t, o.Dir, map[string]string{"local": "", far.Name: far.Host.String()})
	removed := strings.Join(o.Teardown.Removed, "\n")
	if !strings.Contains(removed, "process ") || !strings.Contains(removed, "stateDir ") || !strings.Contains(removed, " on "+far.Host.String()) {
		t.Errorf("teardown removed %q: want the stand-in and its state on %s", o.Teardown.Removed, far.Host)
	}
	if left, _ := filepath.Glob(filepath.Join(hostState, "remote", "*")); len(left) > 0 {
		t.Errorf("the host still holds %v", left)
	}
}

// TestRunLocalBesideHostsOnThisMachine runs `--target
// local,local@ssh://...127.0.0.2,local@ssh://...127.0.0.3` where both
// hosts are this machine with this run's own state directory, as when a
// user tries the SSH targets against their own machine: the run's
// directory here and its directory on each host must be three, so that
// teardown removes everything (nothing refused as lying outside the run's
// directory on a host) and the audit then finds nothing, here or on
// either host.
func TestRunLocalBesideHostsOnThisMachine(t *testing.T) {
	sshtest.Need(t)
	state := testenv.ShortTempDir(t, "sbh-")
	h2 := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv(runs.StateDirEnv, state))
	h3 := sshtest.Start(t, "127.0.0.3", sshtest.SetEnv(runs.StateDirEnv, state), sshtest.Authorize(h2))
	b := provisiontest.GetRunnerBundle(t)
	ctx := context.Background()
	opened := openBundle(t, b)
	specs, err := orchestrate.CheckTargets([]string{"local",
		fmt.Sprintf("local@ssh://%s@%s:%d", h2.User, h2.Addr, h2.Port), fmt.Sprintf("local@ssh://%s@%s:%d", h3.User, h3.Addr, h3.Port)})
	if err != nil {
		t.Fatal(err)
	}
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte(h2.KnownHostsLine()+"\n"+h3.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	far := map[string]remote.Spec{specs[1].Name: specs[1], specs[2].Name: specs[2]}
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{Bundle: opened, Targets: orchestrate.Names(specs), Specs: far,
		SSH: orchestrate.SSH{Identity: h2.ClientKey, KnownHosts: known}, Cells: []string{"C01"}, Samples: 1, Seed: 1,
		Out: t.TempDir(), StateDir: state, Log: t.Logf})
	var ue *cliutil.UserError
	if !errors.As(err, &ue) || ue.Code != orchestrate.ExitMismatch || !strings.Contains(err.Error(), "3 of 3 samples failed") {
		t.Fatalf("Run: %v, want the three failed samples reported, and nothing else (exit %d)", err, orchestrate.ExitMismatch)
	}
	if o.Samples != 3 || len(o.Leftovers) != 0 || o.Kept {
		t.Fatalf("outcome %+v: want a sample on each target, torn down with nothing left", o)
	}
	// The audit of this run: other tests' runs share the dockerd.
	checkRunners(t, o.Dir, map[string]string{"local": "", specs[1].Name: specs[1].Host.String(), specs[2].Name: specs[2].Host.String()})
	res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: o.Run, SSH: runs.SSHOptions{Identity: h2.ClientKey, KnownHosts: known}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) != 0 {
		t.Errorf("the audit after the run finds %v (notes %q)", res.Leftovers, res.Notes)
	}
	for _, d := range []string{runs.RunsDir(state), runs.HostRunsDir(state)} {
		if left, _ := filepath.Glob(filepath.Join(d, "*")); len(left) > 0 {
			t.Errorf("%s still holds %v", d, left)
		}
	}
}

// checkRunners checks that the run's pins name, for each target, where
// its runner ran (want: target to host, "" for this machine), and that
// each reached its Engine through a socket beside it; and that every
// target has its samples.
// runnerHost starts a fake host, 127.0.0.2, with a state directory and a
// sealbench lock of its own, as a host a run installs its runner on; it
// returns the host and that state directory.
func runnerHost(t *testing.T) (*sshtest.Host, string) {
	t.Helper()
	state := testenv.ShortTempDir(t, "sbh-")
	h := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv(runs.StateDirEnv, state), sshtest.SetEnv(remote.LockEnv, filepath.Join(state, "sealbench.lock")))
	return h, state
}

func checkRunners(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, manifests.PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := manifests.ReadRunPins(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tp := range p.Targets {
		got[tp.Name] = tp.RunnerHost
		if tp.Transport != "socket" {
			t.Errorf("pins: %s reached its Engine over %q, want its socket", tp.Name, tp.Transport)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pins: runners %v, want %v", got, want)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(dir, manifests.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for i, s := range samples {
		per[s.Target]++
		if s.Order != i {
			t.Errorf("sample %d has order %d", i, s.Order)
		}
	}
	for name := range want {
		if per[name] == 0 {
			t.Errorf("no sample of %s in %v", name, per)
		}
	}
}
