package engine

import (
	"context"
	"fmt"
	"os"
	"strings"

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

// DefaultDockerHost is the endpoint of the user's dockerd: DOCKER_HOST, or
// the default socket.
func DefaultDockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// Identity is what a run pins about a target: the Engine and the machine
// it runs Sandboxes on, as the Engine itself reports them.
type Identity struct {
	Target        string `json:"target"`
	Engine        string `json:"engine"` // manifests.EngineDockerd, EngineStandin or EngineKubernetes
	EngineVersion string `json:"engineVersion"`
	Endpoint      string `json:"endpoint"`
	Kernel        string `json:"kernel"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	CPUs          int    `json:"cpus"`
	MemoryBytes   int64  `json:"memoryBytes"`
	// Emulated says the target's CPU is emulated (QEMU TCG): its timings
	// are the emulator's, so it is a pass/fail and exact-counts target.
	Emulated bool `json:"emulated,omitempty"`
	// Transport is how Endpoint reaches the Engine: "socket" (the
	// default) or "msb-exec" (a proxy through `msb exec`).
	Transport string `json:"transport,omitempty"`
	// FUSEURing is the host's enable_uring as the run found or set it
	// (manifests.FUSEURingOn, Off, or NA for a target on another kernel):
	// the host fills it in; the Engine does not know it.
	FUSEURing string `json:"fuseURing,omitempty"`
	// Runtime, RuntimeVersion and RuntimePlatform: the OCI runtime
	// Sandboxes run with where it is not the Engine's default ("runsc"),
	// as the Engine and the runtime report it. FUSE is whose FUSE serves
	// them (manifests.FUSELinux or FUSEGVisor; empty: Linux's).
	Runtime         string `json:"runtime,omitempty"`
	RuntimeVersion  string `json:"runtimeVersion,omitempty"`
	RuntimePlatform string `json:"runtimePlatform,omitempty"`
	FUSE            string `json:"fuse,omitempty"`
	// Host is the remote host the Engine is on (ssh://user@host:port), as
	// the target that reaches it knows; empty on the machine that made
	// the run.
	Host string `json:"host,omitempty"`
	// RunnerHost is where the runner that samples the target runs, in
	// Host's form; empty on the machine that made the run.
	RunnerHost string `json:"runnerHost,omitempty"`
	// Cluster, Node, ContainerRuntime and RuntimeHandler say, for a
	// Kubernetes target, which cluster and node its Sandboxes run on, the
	// node's container runtime, and the handler of the RuntimeClass that
	// Runtime names (manifests.TargetPins).
	Cluster          string `json:"cluster,omitempty"`
	Node             string `json:"node,omitempty"`
	ContainerRuntime string `json:"containerRuntime,omitempty"`
	RuntimeHandler   string `json:"runtimeHandler,omitempty"`
	// NodeBootID is the node's boot id (its kernel's random/boot_id): a
	// node whose boot id is this machine's is this machine, whose samples
	// are taken one at a time with the rest of this machine's; any other
	// node's are taken by a runner of its own, in parallel.
	NodeBootID string `json:"nodeBootID,omitempty"`
}

// Pins is what a sample's pins.json says of the target.
func (id *Identity) Pins() manifests.TargetPins {
	tr := id.Transport
	if tr == "" {
		tr = "socket"
	}
	return manifests.TargetPins{Name: id.Target, Engine: id.Engine, Kernel: id.Kernel,
		CPUs: id.CPUs, MemoryBytes: id.MemoryBytes, Emulated: id.Emulated, Transport: tr, FUSEURing: id.FUSEURing,
		Runtime: id.Runtime, RuntimeVersion: id.RuntimeVersion, RuntimePlatform: id.RuntimePlatform, FUSE: id.FUSE, Host: id.Host, RunnerHost: id.RunnerHost,
		Cluster: id.Cluster, Node: id.Node, ContainerRuntime: id.ContainerRuntime, RuntimeHandler: id.RuntimeHandler}
}

// PlanTarget is the target as a run plan carries it to the runner.
func (id *Identity) PlanTarget() manifests.PlanTarget {
	return manifests.PlanTarget{TargetPins: id.Pins(), Endpoint: id.Endpoint, EngineVersion: id.EngineVersion, OS: id.OS, Arch: id.Arch}
}

// IdentityOf is the Identity a run plan's target carries.
func IdentityOf(t manifests.PlanTarget) *Identity {
	return &Identity{Target: t.Name, Engine: t.Engine, EngineVersion: t.EngineVersion, Endpoint: t.Endpoint,
		Kernel: t.Kernel, OS: t.OS, Arch: t.Arch, CPUs: t.CPUs, MemoryBytes: t.MemoryBytes, Emulated: t.Emulated, Transport: t.Transport, FUSEURing: t.FUSEURing,
		Runtime: t.Runtime, RuntimeVersion: t.RuntimeVersion, RuntimePlatform: t.RuntimePlatform, FUSE: t.FUSE, Host: t.Host, RunnerHost: t.RunnerHost,
		Cluster: t.Cluster, Node: t.Node, ContainerRuntime: t.ContainerRuntime, RuntimeHandler: t.RuntimeHandler}
}

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
	return &Identity{Target: target, Engine: kindOf(ver.Platform.Name), EngineVersion: ver.Version, Endpoint: endpoint,
		Kernel: info.KernelVersion, OS: info.OperatingSystem, Arch: info.Architecture, CPUs: info.NCPU, MemoryBytes: info.MemTotal}, nil
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
