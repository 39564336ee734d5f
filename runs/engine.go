package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/manifests"
)

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
		out = append(out, Resource{Target: target, Run: c.Labels[manifests.RunLabel], Kind: manifests.ResourceContainer, Key: name, Detail: c.State, running: c.State == "running"})
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
