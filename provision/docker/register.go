package docker

import (
	"context"
	"fmt"
	"strings"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "the dockerd you have, as the docker CLI finds it (DOCKER_HOST, DOCKER_CONTEXT, the current context; docker@CONTEXT names one)", Order: 20, HostKernel: true,
		At: "CONTEXT",
		New: func(o provision.NewOptions) (provision.Target, error) {
			// docker@CONTEXT: the spec's bare name is a docker context.
			return New(Options{Run: o.Run, Name: o.Name, Context: o.Node, Log: o.Log})
		},
		// docker@ssh://USER@HOST: the host's dockerd over SSH.
		Remote:  func(o provision.RemoteOptions) (provision.Target, error) { return remote.NewDocker(o) },
		Backend: backend{name: Name},
		Needs:   []string{"dockerd", "fuse"},
		Checks: func(ctx context.Context) []provision.Check {
			return []provision.Check{dockerdCheck(ctx)}
		},
		Help: `The dockerd is the one the docker CLI would use: DOCKER_HOST, then
DOCKER_CONTEXT, then currentContext in ~/.docker/config.json (DOCKER_CONFIG
moves it), then /var/run/docker.sock; docker@CONTEXT is that context's
(as docker --context CONTEXT), named docker-CONTEXT in the results; pins.json
records the endpoint and the context. Contexts that need TLS material, and
ssh:// ones, are refused, saying what to give instead.
docker@ssh://USER@HOST[:PORT] is that host's dockerd (its sessions'
DOCKER_HOST, or /var/run/docker.sock) over SSH; provision leaves the image
there and prints DOCKER_HOST=ssh://USER@HOST:PORT for the docker CLI.`,
		Examples: []string{
			"  sealbench provision docker --bundle out/build-linux-0123456789ab --key keys/sealbench.pub --json",
			"  # The dockerd of a docker context (colima, Docker Desktop's desktop-linux, rootless) beside the stand-in:\n  sudo sealbench run --target local,docker@colima --native",
			"  # A remote host's dockerd, sampled by the bundle's runner on that host:\n  sealbench run --target local,docker@ssh://bench@gpu1 --native",
			"  # A remote host's dockerd, then the docker CLI over your ssh:\n  sealbench provision docker@ssh://bench@gpu1 --bundle out/build-linux-0123456789ab --ssh-known-hosts ~/.ssh/known_hosts",
		},
	})
}

// backend is the docker (or gvisor) target's runs.Backend: the audit asks the
// user's dockerd for containers and volumes carrying the run label, and
// --fix removes them; ledger entries are the generic code's.
type backend struct{ name string }

var _ runs.Backend = backend{}

func (backend) Remove(ctx context.Context, _ string, e manifests.LedgerEntry) error {
	if e.Engine != "" || (e.Kind != manifests.ResourceContainer && e.Kind != manifests.ResourceVolume) {
		return runs.ErrGeneric
	}
	// Found by the audit, in no ledger: on the user's dockerd.
	ep, err := ResolveEndpoint("")
	if err != nil {
		return err
	}
	e.Engine = ep.Host
	return runs.RemoveOnEngine(ctx, e)
}

func (backend) Exists(context.Context, string, manifests.LedgerEntry) (bool, string, error) {
	return false, "", runs.ErrGeneric
}

// Audit lists the labelled containers and volumes on the user's dockerd
// (the one the docker CLI would use: ResolveEndpoint); what a run left on
// another context's dockerd its ledger names. A dockerd that does not
// answer is an error: the audit notes it, or fails when docker was asked
// for by name.
func (b backend) Audit(ctx context.Context, run string) ([]runs.Resource, []string, error) {
	ep, err := ResolveEndpoint("")
	if err != nil {
		return nil, nil, err
	}
	host := ep.Host
	cli, err := engine.NewClient(host)
	if err == nil {
		defer cli.Close()
		_, err = cli.Ping(ctx)
	}
	var rs []runs.Resource
	if err == nil {
		rs, err = runs.Labelled(ctx, cli, b.name, run)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dockerd at %s: %w (start it, or choose the dockerd the runs used with DOCKER_HOST or DOCKER_CONTEXT)", ep, err)
	}
	for i := range rs {
		rs[i].Detail = strings.TrimSpace(rs[i].Detail + " on " + host + ", labelled " + manifests.RunLabel)
	}
	return rs, nil, nil
}

// dockerdCheck is the doctor's check of the dockerd the docker CLI would
// use, saying which one and what chose it.
func dockerdCheck(ctx context.Context) provision.Check {
	ep, err := ResolveEndpoint("")
	if err != nil {
		return provision.Check{Name: "dockerd", Detail: err.Error(), Fix: "`docker context ls` lists the contexts; choose one with DOCKER_CONTEXT or `docker context use`, or set DOCKER_HOST"}
	}
	c := provision.DockerdCheck(ctx, ep.Host)
	if ep.Context != DefaultContext {
		c.Detail += " (docker context " + ep.Context + ", from " + ep.From + ")"
	}
	return c
}
