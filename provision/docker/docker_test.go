package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/docker"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

func TestMain(m *testing.M) { provisiontest.Main(m) }

func TestConformance(t *testing.T) {
	testenv.NeedDocker(t)
	b := provisiontest.GetBundle(t)
	provisiontest.Run(t, &provisiontest.Suite{
		New: func(t *testing.T, run *runs.Run) provision.Target {
			d, err := docker.New(docker.Options{Run: run, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Image:  b.Image,
		Engine: manifests.EngineDockerd,
	})
}

// TestAuditFindsLabelledOrphans: a container carrying sealbench.run that
// no ledger names (its run directory is gone) is a leftover on docker, and
// audit --fix removes it.
func TestAuditFindsLabelledOrphans(t *testing.T) {
	b, run, d, cli := newRunWithImage(t)
	ctx := context.Background()
	state := filepath.Dir(filepath.Dir(run.Dir)) // run.Dir is STATE/runs/ID
	if _, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: docker.Name, Endpoint: d.Endpoint(), Image: b.Image.ID, Name: "orphan", Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	// Lose the ledger, as if the run directory were deleted by hand: only
	// the label still says the container is ours.
	run.Close()
	if err := os.RemoveAll(run.Dir); err != nil {
		t.Fatal(err)
	}
	name := engine.SandboxName(run.ID, "orphan")
	t.Cleanup(func() { cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}) })
	t.Cleanup(func() { cli.ImageRemove(ctx, b.Image.ID.String(), image.RemoveOptions{}) })

	// Only this run: the dockerd may be shared with other tests.
	opts := runs.AuditOptions{StateDir: state, Targets: []string{docker.Name}, Run: run.ID}
	res, err := runs.Audit(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.Leftovers {
		found = found || r.Key == name && r.Run == run.ID
	}
	if !found {
		t.Fatalf("audit does not list the labelled container %s: %v", name, res.Leftovers)
	}
	after, err := runs.Fix(ctx, opts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range after.Leftovers {
		if r.Key == name {
			t.Errorf("after --fix: %s", r)
		}
	}
}

// TestAuditLeavesAnotherStateDirsRunningSandbox: a running container
// labelled with a run another state directory made is listed as foreign by
// this state directory's audit, and --fix leaves it (that run may be in
// progress, and its lock is not here to ask) until --force.
func TestAuditLeavesAnotherStateDirsRunningSandbox(t *testing.T) {
	b, run, d, cli := newRunWithImage(t)
	ctx := context.Background()
	id, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: docker.Name, Endpoint: d.Endpoint(), Image: b.Image.ID, Name: "busy", Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runs.Teardown(ctx, run.Dir, runs.TeardownOptions{}) })
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	name := engine.SandboxName(run.ID, "busy")

	other := runs.AuditOptions{StateDir: t.TempDir(), Targets: []string{docker.Name}, Run: run.ID}
	found := func(res *runs.AuditResult) *runs.Resource {
		for _, r := range res.Leftovers {
			if r.Key == name {
				return &r
			}
		}
		return nil
	}
	res, err := runs.Audit(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if r := found(res); r == nil || !r.Foreign {
		t.Fatalf("another state directory's audit: %+v, want %s listed as foreign", res.Leftovers, name)
	}
	if res, err = runs.Fix(ctx, other, t.Logf); err != nil {
		t.Fatal(err)
	}
	if found(res) == nil {
		t.Fatalf("--fix from another state directory removed the running %s", name)
	}
	other.Force = true
	if res, err = runs.Fix(ctx, other, t.Logf); err != nil {
		t.Fatal(err)
	}
	if r := found(res); r != nil {
		t.Errorf("--fix --force left %s", r)
	}
	// In its own state directory the run is not foreign.
	own, err := runs.Audit(ctx, runs.AuditOptions{StateDir: filepath.Dir(filepath.Dir(run.Dir)), Run: run.ID}) // run.Dir is STATE/runs/ID
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range own.Leftovers {
		if r.Foreign {
			t.Errorf("its own state directory calls %s foreign", r)
		}
	}
}

// newRunWithImage makes a run in a fresh state directory with a docker
// target that holds the bundle's Sandbox image, and a client of its dockerd.
func newRunWithImage(t *testing.T) (*provisiontest.Bundle, *runs.Run, *docker.Docker, *client.Client) {
	t.Helper()
	testenv.NeedDocker(t)
	b := provisiontest.GetBundle(t)
	run, err := runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	d, _ := docker.New(docker.Options{Run: run})
	if err := d.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.InstallImage(context.Background(), b.Image); err != nil {
		t.Fatal(err)
	}
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return b, run, d, cli
}
