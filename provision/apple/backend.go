package apple

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// Check says whether this host can run the apple target: the tool is on
// PATH (tool: a path or a name; empty means DefaultTool), a release from
// MinVersion to MaxVersion, and its system service runs. The errors wrap
// ErrToolMissing, ErrToolTooOld, ErrToolUntested or ErrNotRunning, with
// what to do.
func Check(ctx context.Context, tool string) error {
	t, _, err := spec.Check(ctx, tool)
	if err != nil {
		return err
	}
	return systemRuns(ctx, t, false)
}

// systemRuns checks that the tool's system service runs, starting it
// when start is set.
func systemRuns(ctx context.Context, t *toolexec.Tool, start bool) error {
	_, err := t.Run(ctx, "system", "status")
	if err == nil {
		return nil
	}
	if !start {
		return fmt.Errorf("%w: %v; start it with `container system start` (or let sealbench start it)", ErrNotRunning, err)
	}
	if _, err := t.Run(ctx, "system", "start", "--enable-kernel-install"); err != nil {
		return fmt.Errorf("%w: starting it: %v", ErrNotRunning, err)
	}
	if _, err := t.Run(ctx, "system", "status"); err != nil {
		return fmt.Errorf("%w after `container system start`: %v", ErrNotRunning, err)
	}
	return nil
}

// listContainers is `container list --all --format json`.
func listContainers(ctx context.Context, t *toolexec.Tool) ([]containerJSON, error) {
	var cs []containerJSON
	if err := t.JSON(ctx, &cs, "list", "--all", "--format", "json"); err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	return cs, nil
}

// findContainer returns the container named name, or nil.
func findContainer(ctx context.Context, t *toolexec.Tool, name string) (*containerJSON, error) {
	cs, err := listContainers(ctx, t)
	if err != nil {
		return nil, err
	}
	for i := range cs {
		if cs[i].Configuration.ID == name {
			return &cs[i], nil
		}
	}
	return nil, nil
}

// labelled lists the containers carrying the run label (value run, or
// any value when run is ""). The tool cannot filter by label, so every
// container is listed and filtered here.
func labelled(ctx context.Context, t *toolexec.Tool, run string) ([]containerJSON, error) {
	cs, err := listContainers(ctx, t)
	if err != nil {
		return nil, err
	}
	var out []containerJSON
	for _, c := range cs {
		v, ok := c.Configuration.Labels[manifests.RunLabel]
		if ok && (run == "" || v == run) {
			out = append(out, c)
		}
	}
	return out, nil
}

// normalRef drops the default registry the tool may add to a reference
// (docker.io/library/x:t is x:t, docker.io/a/b:t is a/b:t): the tool
// keeps a loaded image under the reference its layout names, and finds
// one by that or by its normalized form (ClientImage.get in
// Sources/Services/ContainerAPIService/Client/ClientImage.swift).
func normalRef(ref string) string {
	ref = strings.TrimPrefix(ref, "docker.io/")
	return strings.TrimPrefix(ref, "library/")
}

func hasImage(ctx context.Context, t *toolexec.Tool, ref string) (bool, error) {
	var ims []imageJSON
	if err := t.JSON(ctx, &ims, "image", "list", "--format", "json"); err != nil {
		return false, fmt.Errorf("listing images: %w", err)
	}
	for _, im := range ims {
		if normalRef(im.Configuration.Name) == normalRef(ref) {
			return true, nil
		}
	}
	return false, nil
}

func listVolumes(ctx context.Context, t *toolexec.Tool) ([]volumeJSON, error) {
	var vs []volumeJSON
	if err := t.JSON(ctx, &vs, "volume", "list", "--format", "json"); err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	return vs, nil
}

// removeContainer deletes container name, running or not, and then the
// anonymous volumes its mounts named (the tool keeps them: unlike
// Docker, `container delete` and --rm leave anonymous volumes behind;
// they are known by anonymousLabel). An absent container is not an
// error.
func removeContainer(ctx context.Context, t *toolexec.Tool, name string) error {
	c, err := findContainer(ctx, t, name)
	if err != nil || c == nil {
		return err
	}
	if _, err := t.Run(ctx, "delete", "--force", name); err != nil {
		// Gone meanwhile is gone.
		if c2, lerr := findContainer(ctx, t, name); lerr == nil && c2 == nil {
			return nil
		}
		return err
	}
	mounted := map[string]bool{}
	for _, m := range c.Configuration.Mounts {
		if v := m.volume(); v != "" {
			mounted[v] = true
		}
	}
	if len(mounted) == 0 {
		return nil
	}
	vs, err := listVolumes(ctx, t)
	if err != nil {
		return err
	}
	var errs *multierror.Error
	for _, v := range vs {
		if mounted[v.name()] && v.anonymous() {
			if err := removeVolume(ctx, t, v.name()); err != nil {
				errs = multierror.Append(errs, err)
			}
		}
	}
	return errs.ErrorOrNil()
}

// findVolume returns the volume named name, or nil.
func findVolume(ctx context.Context, t *toolexec.Tool, name string) (*volumeJSON, error) {
	vs, err := listVolumes(ctx, t)
	if err != nil {
		return nil, err
	}
	for i := range vs {
		if vs[i].name() == name {
			return &vs[i], nil
		}
	}
	return nil, nil
}

// removeVolume deletes volume name; an absent volume is not an error.
func removeVolume(ctx context.Context, t *toolexec.Tool, name string) error {
	v, err := findVolume(ctx, t, name)
	if err != nil || v == nil {
		return err
	}
	_, err = t.Run(ctx, "volume", "delete", name)
	return err
}

func removeImage(ctx context.Context, t *toolexec.Tool, ref string) error {
	have, err := hasImage(ctx, t, ref)
	if err != nil || !have {
		return err
	}
	_, err = t.Run(ctx, "image", "delete", ref)
	return err
}

// holder reaches what `container` holds: VMs (containers) by name,
// images by reference, volumes by name.
type holder struct{}

func (holder) Remove(ctx context.Context, t *toolexec.Tool, e manifests.LedgerEntry) error {
	switch e.Kind {
	case manifests.ResourceImage:
		return removeImage(ctx, t, e.Key)
	case manifests.ResourceVolume:
		return removeVolume(ctx, t, e.Key)
	}
	return removeContainer(ctx, t, e.Key)
}

func (holder) Exists(ctx context.Context, t *toolexec.Tool, e manifests.LedgerEntry) (bool, string, error) {
	switch e.Kind {
	case manifests.ResourceImage:
		ok, err := hasImage(ctx, t, e.Key)
		return ok, "in container's image store", err
	case manifests.ResourceVolume:
		v, err := findVolume(ctx, t, e.Key)
		return v != nil, "a container volume", err
	}
	c, err := findContainer(ctx, t, e.Key)
	if err != nil || c == nil {
		return false, "", err
	}
	return true, "container VM, " + c.state(), nil
}

// Audit lists the containers and volumes carrying the run label; with
// the system service stopped, nothing can be listed, and a note says so.
func (holder) Audit(ctx context.Context, t *toolexec.Tool, run string) ([]runs.Resource, []string, error) {
	if _, err := t.Run(ctx, "system", "status"); err != nil {
		return nil, []string{fmt.Sprintf("the container system service is not running, so its containers were not listed (start it with `container system start` and audit again): %v", err)}, nil
	}
	cs, err := labelled(ctx, t, run)
	if err != nil {
		return nil, nil, err
	}
	var out []runs.Resource
	for _, c := range cs {
		out = append(out, runs.Resource{Run: c.Configuration.Labels[manifests.RunLabel], Kind: manifests.ResourceVM,
			Key: c.Configuration.ID, Detail: "container VM, " + c.state() + ", labelled " + manifests.RunLabel})
	}
	vs, err := listVolumes(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	for _, v := range vs {
		if r, ok := v.Configuration.Labels[manifests.RunLabel]; ok && (run == "" || r == run) {
			out = append(out, runs.Resource{Run: r, Kind: manifests.ResourceVolume, Key: v.name(), Detail: "a container volume labelled " + manifests.RunLabel})
		}
	}
	return out, nil, nil
}
