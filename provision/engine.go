package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
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

// DefaultDockerHost is the endpoint of the user's dockerd: DOCKER_HOST, or
// the default socket.
func DefaultDockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// LoadImage installs img into the Engine at endpoint, for target of run:
// skipped when the Engine already has img.ID, otherwise recorded in the
// ledger first, loaded, and checked (the Engine must then have img.ID).
func LoadImage(ctx context.Context, run *Run, target, endpoint string, cli *client.Client, img Image) error {
	if err := img.ID.Validate(); err != nil {
		return fmt.Errorf("image to install: %w", err)
	}
	// An image the Engine has already is not the run's to remove: it is
	// recorded, and so torn down, only when this run loads it.
	if _, err := cli.ImageInspect(ctx, img.ID.String()); err == nil {
		return nil
	}
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: target, Kind: manifests.ResourceImage, Key: img.ID.String(), Engine: endpoint, Detail: img.Ref}); err != nil {
		return err
	}
	f, err := os.Open(img.Tar)
	if err != nil {
		return fmt.Errorf("opening the Sandbox image: %w", err)
	}
	defer f.Close()
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("loading %s into %s: %w", img.Tar, endpoint, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("loading %s into %s: reading the answer: %w", img.Tar, endpoint, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("loading %s into %s: %s", img.Tar, endpoint, msg.Error)
		}
	}
	got, err := cli.ImageInspect(ctx, img.ID.String())
	if err != nil {
		return fmt.Errorf("after loading %s, %s has no image %s: the tar is not the image its identity file names (%w)", img.Tar, endpoint, img.ID, err)
	}
	if got.ID != img.ID.String() {
		return fmt.Errorf("after loading, %s answers image %s for %s", endpoint, got.ID, img.ID)
	}
	return nil
}

// SandboxName is the container name of Sandbox name in run: unique on
// the Engine and known before the container exists.
func SandboxName(runID, name string) string { return "sealbench-" + runID + "-" + name }

// SandboxConfig is how every Sandbox is created: the run's label,
// /dev/fuse, CAP_SYS_ADMIN (for layerfsd's FUSE mounts), no network at all,
// and no-new-privileges (so no setuid or file-capability binary can give a
// body more than it has). On dockerd (engine EngineDockerd) it also gets
// DockerSeccompProfile, which refuses new namespaces; the stand-in's
// Sandboxes have their own, stricter filter.
func SandboxConfig(runID string, img Image, cmd []string, engine string) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:  img.ID.String(),
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
	}
	if engine == EngineDockerd {
		host.SecurityOpt = append(host.SecurityOpt, "seccomp="+DockerSeccompProfile())
	}
	return cfg, host
}

// EngineKind asks the Engine behind cli what it is: EngineStandin or
// EngineDockerd.
func EngineKind(ctx context.Context, cli *client.Client) (string, error) {
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	if strings.Contains(v.Platform.Name, "stand-in") {
		return EngineStandin, nil
	}
	return EngineDockerd, nil
}

// CreateSandbox records and creates one Sandbox container of run on the
// Engine at endpoint, returning its id.
func CreateSandbox(ctx context.Context, run *Run, target, endpoint string, cli *client.Client, img Image, name string, cmd []string) (string, error) {
	engine, err := EngineKind(ctx, cli)
	if err != nil {
		return "", fmt.Errorf("asking the Engine at %s what it is: %w", endpoint, err)
	}
	cname := SandboxName(run.ID, name)
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: target, Kind: manifests.ResourceContainer, Key: cname, Engine: endpoint,
		Labels: map[string]string{manifests.RunLabel: run.ID}, Detail: "Sandbox " + name}); err != nil {
		return "", err
	}
	cfg, host := SandboxConfig(run.ID, img, cmd, engine)
	resp, err := cli.ContainerCreate(ctx, cfg, host, &network.NetworkingConfig{}, nil, cname)
	if err != nil {
		return "", fmt.Errorf("creating Sandbox %s on %s: %w", cname, endpoint, err)
	}
	return resp.ID, nil
}

// Labelled lists the containers and volumes on cli that carry the run
// label (with value runID, or any value when runID is "").
func Labelled(ctx context.Context, cli *client.Client, target, runID string) ([]Resource, error) {
	label := manifests.RunLabel
	if runID != "" {
		label += "=" + runID
	}
	f := filters.NewArgs(filters.Arg("label", label))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	var out []Resource
	for _, c := range cs {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Resource{Target: target, Run: c.Labels[manifests.RunLabel], Kind: manifests.ResourceContainer, Key: name, Detail: c.State})
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	for _, v := range vs.Volumes {
		out = append(out, Resource{Target: target, Run: v.Labels[manifests.RunLabel], Kind: manifests.ResourceVolume, Key: v.Name})
	}
	return out, nil
}

// engineGone reports whether err says the Engine could not be reached at all.
func engineGone(err error) bool {
	return client.IsErrConnectionFailed(err) || errors.Is(err, os.ErrNotExist)
}
