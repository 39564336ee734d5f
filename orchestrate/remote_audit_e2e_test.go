package orchestrate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestProvisionOnADockerHostThenAuditAfterTheRunIsGone: provision leaves
// docker@ssh up (the image loaded on the fake host's dockerd, the forward
// gone with it) and says DOCKER_HOST=ssh://... reaches it; the state
// directory's hosts.history names the host. Then the run's directory is
// lost with a Sandbox of the run still on the host, labelled and
// recorded nowhere: the audit, with no run, still asks the host and finds
// it (with --target naming the host's spec too, not for another run),
// and --fix removes it.
func TestProvisionOnADockerHostThenAuditAfterTheRunIsGone(t *testing.T) {
	h, endpoint, opened, specs := dockerHostH1(t)
	ctx := context.Background()
	hostName := specs[0].Host.String()
	state := testenv.ShortTempDir(t, "sbh-")
	out, err := orchestrate.Provision(ctx, orchestrate.ProvisionOptions{Target: "h1", Remote: &specs[0], SSH: orchestrate.SSH{Identity: h.ClientKey, KnownHosts: h.KnownHosts},
		Bundle: opened, StateDir: state, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if out.Endpoint != hostName || out.Host != hostName || out.Identity.Host != hostName || out.Identity.Transport != "ssh" || out.Identity.FUSEURing != manifests.FUSEURingNA {
		t.Errorf("provisioned %+v (identity %+v): want DOCKER_HOST %s, the host pinned, over ssh, enable_uring n/a", out, out.Identity, hostName)
	}
	hist, err := os.ReadFile(filepath.Join(state, runs.HostsHistoryFile))
	if want := fmt.Sprintf(`{"run":%q,"host":%q,"knownHosts":%q,"identity":%q}`, out.Run, hostName, h.KnownHosts, h.ClientKey); err != nil || !strings.Contains(string(hist), want) {
		t.Errorf("%s: %q (%v), want %s", runs.HostsHistoryFile, hist, err, want)
	}
	cli, err := engine.NewClient(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, opened.Image.ID.String()); err != nil {
		t.Fatalf("the image is not on the host's dockerd after provision: %v", err)
	}
	// A Sandbox the run left and its ledger does not name, then the run's
	// directory (ledger, hosts.json) lost.
	left, err := cli.ContainerCreate(ctx, &container.Config{Image: opened.Image.ID.String(), Cmd: []string{"true"}, Labels: map[string]string{manifests.RunLabel: out.Run}},
		nil, nil, nil, "sealbench-left-"+out.Run)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(out.RunDir); err != nil {
		t.Fatal(err)
	}
	found := func(o runs.AuditOptions) bool {
		t.Helper()
		o.StateDir = state
		res, err := runs.Audit(ctx, o)
		if err != nil {
			t.Fatalf("audit %+v: %v", o, err)
		}
		for _, r := range res.Leftovers {
			if r.Host == hostName && r.Run == out.Run && r.Kind == manifests.ResourceContainer && r.Key == "sealbench-left-"+out.Run {
				return true
			}
		}
		t.Logf("audit %+v: %v (notes %q)", o, res.Leftovers, res.Notes)
		return false
	}
	if !found(runs.AuditOptions{}) {
		t.Error("the audit does not find the run's labelled Sandbox on the host once the run's directory is gone")
	}
	if !found(runs.AuditOptions{Targets: []string{"h1"}, Hosts: []string{hostName}}) {
		t.Error("audit --target h1=docker@ssh://... does not find it")
	}
	if !found(runs.AuditOptions{Run: out.Run}) {
		t.Errorf("audit --run %s does not find it", out.Run)
	}
	if found(runs.AuditOptions{Run: "20200101T000000-abcdef"}) {
		t.Error("the audit of another run finds it")
	}
	// Only this run's: without a run, --fix also removes what other runs
	// labelled on the dockerd this test shares (DOCKER_HOST), such as the
	// Sandboxes of tests running beside it.
	if _, err := runs.Fix(ctx, runs.AuditOptions{StateDir: state, Run: out.Run}, t.Logf); err != nil {
		t.Errorf("audit --fix: %v", err)
	}
	if _, err := cli.ContainerInspect(ctx, left.ID); err == nil {
		t.Error("audit --fix left the labelled Sandbox on the host")
	}
	if found(runs.AuditOptions{}) {
		t.Error("the audit still finds it after --fix")
	}
}

// dockerHostH1 is a fake host whose sessions' DOCKER_HOST is a dockerd of
// the test's own, the runner bundle opened, and the spec of a docker@ssh
// target named h1 there.
func dockerHostH1(t *testing.T) (*sshtest.Host, string, *orchestrate.Bundle, []remote.Spec) {
	t.Helper()
	sshtest.Need(t)
	endpoint := testenv.PrivateDockerd(t)
	// Its own state directory and lock: the fake hosts share this
	// machine's kernel and filesystem.
	hostState := testenv.ShortTempDir(t, "sbh-")
	h := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv("DOCKER_HOST", endpoint), sshtest.SetEnv(runs.StateDirEnv, hostState),
		sshtest.SetEnv(remote.LockEnv, filepath.Join(hostState, "sealbench.lock")))
	b := provisiontest.GetRunnerBundle(t)
	opened, err := orchestrate.OpenBundle(context.Background(), orchestrate.BundleOptions{Dir: b.Dir, Key: b.PubKey, Expect: b.Name, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := orchestrate.CheckTargets([]string{fmt.Sprintf("h1=docker@ssh://%s@%s:%d", h.User, h.Addr, h.Port)})
	if err != nil {
		t.Fatal(err)
	}
	return h, endpoint, opened, specs
}
