package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/manifests"
)

// NewClient returns an Engine API client for endpoint (unix:///..., tcp://...),
// negotiating the API version, so that dockerd and the stand-in are driven
// by the same code. An empty endpoint means DOCKER_HOST or the default socket.
func NewClient(endpoint string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if endpoint != "" {
		opts = append(opts, client.WithHost(endpoint))
	}
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("Engine client for %q: %w", endpoint, err)
	}
	return c, nil
}

// Ping asks the Engine at endpoint whether it answers, waiting at most d.
func Ping(ctx context.Context, endpoint string, d time.Duration) error {
	cli, err := NewClient(endpoint)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err = cli.Ping(ctx)
	return err
}

// CheckEndpoint says whether s is an Engine endpoint NewClient can dial:
// unix:///an/absolute/socket, or tcp://, http:// or https://host:port. It
// dials nothing, so commands can refuse a bad one before doing any work.
func CheckEndpoint(s string) error {
	u, err := client.ParseHostURL(s)
	if err != nil {
		return fmt.Errorf("%q is not an Engine URL (scheme://address)", s)
	}
	switch u.Scheme {
	case "unix":
		if !strings.HasPrefix(u.Host, "/") {
			return fmt.Errorf("%q: a unix socket's path must be absolute (unix:///path/to/socket)", s)
		}
	case "tcp", "http", "https":
		if u.Host == "" {
			return fmt.Errorf("%q names no host", s)
		}
	default:
		return fmt.Errorf("%q: scheme %q is not one of unix, tcp, http, https", s, u.Scheme)
	}
	return nil
}

// Identity is what a run knows about a target: what it pins
// (manifests.TargetPins: the Engine and the machine it runs Sandboxes
// on, as the Engine itself reports them, and what the target adds of its
// own), where the Engine is and what it runs: manifests.PlanTarget, as a
// run plan carries it to the runner.
type Identity struct {
	manifests.PlanTarget
	// NodeBootID is a Kubernetes node's boot id (its kernel's
	// random/boot_id): a node whose boot id is this machine's is this
	// machine, whose samples are taken one at a time with the rest of
	// this machine's; any other node's are taken by a runner of its own,
	// in parallel.
	NodeBootID string `json:"nodeBootID,omitempty"`
}

// Pins is what a sample's pins.json says of the target: its pins, with
// the transport ("socket" where the target set none).
func (id *Identity) Pins() manifests.TargetPins {
	p := id.TargetPins
	if p.Transport == "" {
		p.Transport = "socket"
	}
	return p
}

// PlanTarget is the target as a run plan carries it to the runner.
func (id *Identity) Plan() manifests.PlanTarget {
	pt := id.PlanTarget
	pt.TargetPins = id.Pins()
	return pt
}

// IdentityOf is the Identity a run plan's target carries.
func IdentityOf(t manifests.PlanTarget) *Identity { return &Identity{PlanTarget: t} }

// Identify asks the Engine at endpoint what it is (/version: the stand-in
// names itself in its platform) and what it runs on (/info), for target.
func Identify(ctx context.Context, target, endpoint string) (*Identity, error) {
	cli, err := NewClient(endpoint)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return IdentifyClient(ctx, cli, target, endpoint)
}

// IdentifyClient is Identify over a client already connected to endpoint.
func IdentifyClient(ctx context.Context, cli client.APIClient, target, endpoint string) (*Identity, error) {
	ver, err := cli.ServerVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the Engine at %s what it is: %w", endpoint, err)
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the Engine at %s about its machine: %w", endpoint, err)
	}
	return &Identity{PlanTarget: manifests.PlanTarget{
		TargetPins:    manifests.TargetPins{Name: target, Engine: kindOf(ver.Platform.Name), Kernel: info.KernelVersion, CPUs: info.NCPU, MemoryBytes: info.MemTotal, Endpoint: endpoint},
		EngineVersion: ver.Version, OS: info.OperatingSystem, Arch: info.Architecture}}, nil
}

// kindOf says which Engine a /version platform name is: the stand-in
// calls itself "sealbench stand-in", the kube-engine "sealbench
// kube-engine"; anything else is a dockerd.
func kindOf(platform string) string {
	switch {
	case strings.Contains(platform, "stand-in"):
		return manifests.EngineStandin
	case strings.Contains(platform, "kube-engine"):
		return manifests.EngineKubernetes
	}
	return manifests.EngineDockerd
}
