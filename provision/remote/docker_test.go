package remote_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
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
		New: func(t *testing.T, run *runs.Run) provision.Target {
			if err := runs.RecordHost(run.Dir, runs.HostRecord{Host: host, KnownHosts: h.KnownHosts, Identity: h.ClientKey}); err != nil {
				t.Fatal(err)
			}
			c, err := sshx.Dial(context.Background(), h.Config())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			d, err := remote.NewDocker(provision.RemoteOptions{NewOptions: provision.NewOptions{Run: run, Name: "docker-h", Log: t.Logf}, Host: host, SSH: c})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Image:  b.Image,
		Engine: manifests.EngineDockerd,
		Host:   host,
	}, endpoint
}

// TestDockerOverSSHConformance runs the conformance suite on docker@ssh;
// its ledger names the host, and the Engine as the host sees it.
func TestDockerOverSSHConformance(t *testing.T) {
	s, _ := dockerOnFakeHost(t)
	provisiontest.Run(t, s)
}
