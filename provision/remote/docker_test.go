package remote_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/provision/sshx"
	"github.com/sealbench/sealbench/provision/sshx/sshtest"
)

func TestMain(m *testing.M) { provisiontest.Main(m) }

// dockerOnFakeHost is the docker@ssh target on a fake host whose sessions'
// DOCKER_HOST is a dockerd of the test's own.
func dockerOnFakeHost(t *testing.T) (*provisiontest.Suite, string) {
	t.Helper()
	sshtest.Need(t)
	endpoint := testenv.PrivateDockerd(t)
	h := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv("DOCKER_HOST", endpoint))
	host := fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	b := provisiontest.GetBundle(t)
	return &provisiontest.Suite{
		New: func(t *testing.T, run *provision.Run) provision.Target {
			if err := provision.RecordHost(run.Dir, provision.HostRecord{Host: host, KnownHosts: h.KnownHosts, Identity: h.ClientKey}); err != nil {
				t.Fatal(err)
			}
			c, err := sshx.Dial(context.Background(), h.Config())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			d, err := remote.NewDocker(provision.RemoteOptions{NewOptions: provision.NewOptions{Run: run, Log: t.Logf}, Name: "docker-h", Host: host, SSH: c})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Image:  b.Image,
		Engine: manifests.EngineDockerd,
	}, endpoint
}

// TestDockerOverSSHConformance runs the conformance suite on docker@ssh,
// but for its InstallImage test, which wants the image's ledger entry to
// name the target's Endpoint: a remote target's entry names the Engine as
// its host sees it, with the host (docs/design/remote-hosts.md, What is
// left); TestDockerOverSSHInstallImage checks that instead.
func TestDockerOverSSHConformance(t *testing.T) {
	s, _ := dockerOnFakeHost(t)
	var names []string
	for n := range provisiontest.Tests {
		if n != "InstallImage" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) { provisiontest.Tests[n](t, s) })
	}
	t.Run("InstallImage", func(t *testing.T) { installImageOnHost(t, s) })
}

// installImageOnHost: the image is in the host's dockerd under its id,
// recorded with the host and the Engine as the host sees it, and a tar
// under another id is refused naming the id.
func installImageOnHost(t *testing.T, s *provisiontest.Suite) {
	ctx := context.Background()
	// A short path, as the suite's: the forward's socket lives under it.
	state, err := os.MkdirTemp("", "sbt-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	run, err := provision.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		run.Close()
		if _, err := provision.Teardown(ctx, run.Dir, provision.TeardownOptions{}); err != nil {
			t.Errorf("teardown: %v", err)
		}
	}()
	d := s.New(t, run)
	if err := d.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.InstallImage(ctx, s.Image); err != nil {
		t.Fatal(err)
	}
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if got, err := cli.ImageInspect(ctx, s.Image.ID.String()); err != nil || got.ID != s.Image.ID.String() {
		t.Fatalf("image %s: %v", s.Image.ID, err)
	}
	hostEngine := ""
	for _, e := range run.Ledger.Entries() {
		if e.Kind == manifests.ResourceImage && e.Key == s.Image.ID.String() {
			if e.Host == "" || e.Engine == d.Endpoint() || !strings.HasPrefix(e.Engine, "unix:///") {
				t.Errorf("the image is recorded as %+v: want the host, and the Engine as the host sees it", e)
			}
			hostEngine = e.Engine
		}
	}
	if hostEngine == "" {
		t.Errorf("the image is not in the ledger: %+v", run.Ledger.Entries())
	}
	bad := s.Image
	bad.ID = manifests.DigestOf([]byte("not this image"))
	if err := d.InstallImage(ctx, bad); err == nil || !strings.Contains(err.Error(), bad.ID.String()) {
		t.Errorf("installing a tar under the wrong id: %v, want an error naming the id", err)
	}
	id, err := d.Identity(ctx)
	if err != nil || id.Transport != remote.TransportSSH || id.Endpoint != d.Endpoint() {
		t.Errorf("identity %+v: %v", id, err)
	}
}
