package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/docker"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

func newGVisor(t *testing.T, run *runs.Run) *docker.Docker {
	d, err := docker.New(docker.Options{Run: run, Log: t.Logf, Target: docker.GVisorName})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestGVisorConformance is the conformance suite on the gvisor target: the
// suite's Sandboxes run with the runtime its Identity names, runsc.
func TestGVisorConformance(t *testing.T) {
	testenv.NeedDockerRuntime(t, docker.GVisorRuntime)
	b := provisiontest.GetBundle(t)
	provisiontest.Run(t, &provisiontest.Suite{
		New:    func(t *testing.T, run *runs.Run) provision.Target { return newGVisor(t, run) },
		Image:  b.Image,
		Engine: manifests.EngineDockerd,
	})
}

// TestGVisorSandboxRunsUnderGVisor: a gvisor Sandbox is created with the
// runsc runtime and runs on gVisor's kernel (its uname says so), and the
// target's pins say which runsc, on which platform, and whose FUSE.
func TestGVisorSandboxRunsUnderGVisor(t *testing.T) {
	testenv.NeedDockerRuntime(t, docker.GVisorRuntime)
	ctx := context.Background()
	b, run, d := upGVisor(t)
	id, err := d.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := id.Pins()
	if p.Name != docker.GVisorName || p.Runtime != docker.GVisorRuntime || p.FUSE != manifests.FUSEGVisor || p.RuntimePlatform != "systrap" ||
		p.RuntimeVersion == "" || p.RuntimeVersion == "unknown" {
		t.Errorf("pins %+v: want target gvisor, runtime runsc with a version, platform systrap, FUSE gvisor", p)
	}
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cid, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: docker.GVisorName, Endpoint: d.Endpoint(),
		Runtime: p.Runtime, GVisor: true, Image: b.Image.ID, Name: "uname", Cmd: []string{"sh", "-c", "uname -r"}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cli.ContainerInspect(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if info.HostConfig.Runtime != docker.GVisorRuntime {
		t.Errorf("the Sandbox's runtime is %q, want %q", info.HostConfig.Runtime, docker.GVisorRuntime)
	}
	out := runToEnd(t, ctx, cli, cid)
	if !strings.Contains(out, "gvisor") {
		t.Errorf("uname -r in a gvisor Sandbox says %q: not gVisor's kernel", out)
	}

}

// TestGVisorSandboxStartsThreads: under the Sandboxes' seccomp profile,
// which runsc applies inside its Sentry (--oci-seccomp), a glibc program
// starts a thread. glibc tries clone3 first and falls back to clone only
// on ENOSYS; runsc answers any refused call EPERM (google/gvisor#14688),
// so the profile must not refuse clone3 under gVisor: rg and git could
// start no thread when it did.
func TestGVisorSandboxStartsThreads(t *testing.T) {
	testenv.NeedDockerRuntime(t, docker.GVisorRuntime)
	bin := filepath.Join(t.TempDir(), "threads")
	if out, err := exec.Command("gcc", "-static", "-pthread", "-O1", "-o", bin, filepath.Join("testdata", "threads.c")).CombinedOutput(); err != nil {
		testenv.Skip(t, "building a static glibc program needs gcc and glibc's static library (libc6-dev): %v: %s", err, out)
	}
	ctx := context.Background()
	b, run, d := upGVisor(t)
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cid, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: docker.GVisorName, Endpoint: d.Endpoint(),
		Engine: manifests.EngineDockerd, Runtime: docker.GVisorRuntime, GVisor: true, Image: b.Image.ID, Name: "threads", Cmd: []string{"/threads"}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	tw.WriteHeader(&tar.Header{Name: "threads", Mode: 0o755, Size: int64(len(data))})
	tw.Write(data)
	tw.Close()
	if err := cli.CopyToContainer(ctx, cid, "/", &tarball, container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := runToEnd(t, ctx, cli, cid); !strings.Contains(out, "threads started") {
		t.Errorf("a thread in a gvisor Sandbox: %q", out)
	}
}

// upGVisor makes a run with a gvisor target, created and holding the
// test bundle's image; both go when the test ends, the target first.
func upGVisor(t *testing.T) (*provisiontest.Bundle, *runs.Run, *docker.Docker) {
	t.Helper()
	b := provisiontest.GetBundle(t)
	ctx := context.Background()
	run, err := runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	d := newGVisor(t, run)
	t.Cleanup(func() {
		if err := d.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	if err := d.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.InstallImage(ctx, b.Image); err != nil {
		t.Fatal(err)
	}
	return b, run, d
}

// TestGVisorDoctorCheck: the doctor's runsc check passes against a
// dockerd with runsc, and names its version and platform.
func TestGVisorDoctorCheck(t *testing.T) {
	testenv.NeedDockerRuntime(t, docker.GVisorRuntime)
	ep, err := docker.ResolveEndpoint("")
	if err != nil {
		t.Fatal(err)
	}
	c := docker.RunscCheck(context.Background(), ep.Host)
	if !c.OK || !strings.Contains(c.Detail, "platform systrap") || !strings.Contains(c.Detail, "version v") {
		t.Errorf("runsc check %+v: want OK, with its version and platform", c)
	}
}

// runToEnd starts container id, waits for it to exit 0, and returns its stdout.
func runToEnd(t *testing.T, ctx context.Context, cli *client.Client, id string) string {
	t.Helper()
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, errC := cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			t.Fatalf("the Sandbox exited %d", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	rc, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, rc); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(stdout.String())
}
