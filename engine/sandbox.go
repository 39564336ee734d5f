package engine

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/manifests"
)

// Recorder records a resource before it is created: the one method of a
// run's ledger that this package needs. Record MUST make the entry durable
// before it returns nil, so that a crash right after leaves the resource
// findable by teardown.
type Recorder interface {
	Record(e manifests.LedgerEntry) error
}

// A Retracter is a Recorder that can take an entry back (the run's ledger
// can): Retract marks the standing entry of e's resource as never made,
// because its create failed with nothing made, saying why; teardown then
// passes it. Only a create known to have made nothing is retracted.
type Retracter interface {
	Retract(e manifests.LedgerEntry, why string) error
}

// SandboxName is the container name of Sandbox name in run: unique on
// the Engine and known before the container exists.
func SandboxName(runID, name string) string { return "sealbench-" + runID + "-" + name }

// SandboxConfig is how every Sandbox is created: the run's label,
// /dev/fuse, CAP_SYS_ADMIN (for layerfsd's FUSE mounts), no network at all,
// and no-new-privileges (so no setuid or file-capability binary can give a
// body more than it has). On dockerd (engine manifests.EngineDockerd) and
// the kube-engine (EngineKubernetes: a Localhost profile of the pod) it
// also gets DockerSeccompProfile, which refuses new namespaces; the
// stand-in's Sandboxes have their own, stricter filter. runtime is the OCI
// runtime dockerd runs it with ("runsc" for gVisor); empty is its default.
// gvisor says the runtime is gVisor's, whose profile differs in one call
// (DockerSeccompProfile).
func SandboxConfig(runID string, image manifests.Digest, cmd []string, engine, runtime string, gvisor bool) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:  image.String(),
		Cmd:    cmd,
		Labels: map[string]string{manifests.RunLabel: runID},
	}
	host := &container.HostConfig{
		NetworkMode: "none",
		Resources: container.Resources{
			Devices: []container.DeviceMapping{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}},
		},
		CapAdd:      []string{"SYS_ADMIN"},
		SecurityOpt: []string{"no-new-privileges"},
		Runtime:     runtime,
	}
	if engine == manifests.EngineDockerd || engine == manifests.EngineKubernetes {
		host.SecurityOpt = append(host.SecurityOpt, "seccomp="+DockerSeccompProfile(gvisor))
	}
	return cfg, host
}

// Sandbox says which Sandbox CreateSandbox makes, and where.
type Sandbox struct {
	RunID    string
	Target   string // the target's name, for the ledger
	Endpoint string // the Engine's, for the ledger
	// Engine is the Engine's kind (Identity.Engine); empty asks it.
	Engine string
	Image  manifests.Digest
	Name   string // unique in the run; the container is SandboxName(RunID, Name)
	Cmd    []string
	// Runtime is the OCI runtime to run it with (the target Identity's
	// Runtime: runsc on gvisor); empty means the Engine's default.
	Runtime string
	// GVisor says the runtime is gVisor's (the Identity's FUSE is
	// manifests.FUSEGVisor: the gvisor target, a gVisor RuntimeClass).
	GVisor bool
}

// CreateSandbox records the Sandbox with rec, then creates it on cli (a
// client of s.Endpoint), returning the container's id.
func CreateSandbox(ctx context.Context, cli client.APIClient, rec Recorder, s Sandbox) (string, error) {
	if s.Engine == "" {
		ver, err := cli.ServerVersion(ctx)
		if err != nil {
			return "", fmt.Errorf("asking the Engine at %s what it is: %w", s.Endpoint, err)
		}
		s.Engine = kindOf(ver.Platform.Name)
	}
	cname := SandboxName(s.RunID, s.Name)
	if err := rec.Record(manifests.LedgerEntry{Target: s.Target, Kind: manifests.ResourceContainer, Key: cname, Engine: s.Endpoint,
		Labels: map[string]string{manifests.RunLabel: s.RunID}, Detail: "Sandbox " + s.Name}); err != nil {
		return "", err
	}
	cfg, host := SandboxConfig(s.RunID, s.Image, s.Cmd, s.Engine, s.Runtime, s.GVisor)
	resp, err := cli.ContainerCreate(ctx, cfg, host, &network.NetworkingConfig{}, nil, cname)
	if err != nil {
		return "", fmt.Errorf("creating Sandbox %s on %s: %w", cname, s.Endpoint, err)
	}
	return resp.ID, nil
}
