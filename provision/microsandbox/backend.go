package microsandbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/toolexec"
)

// sandboxJSON is one entry of `msb ls --format json`: superradcompany/
// microsandbox crates/cli/lib/commands/list.rs prints name, status
// (Running, Stopped, Crashed, Draining), created_at and image.
type sandboxJSON struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	Image     string `json:"image"`
}

// listSandboxes is `msb ls --label sealbench.run[=run] --format json`.
func listSandboxes(ctx context.Context, t *toolexec.Tool, run string) ([]sandboxJSON, error) {
	label := manifests.RunLabel
	if run != "" {
		label += "=" + run
	}
	var ss []sandboxJSON
	if err := t.JSON(ctx, &ss, "ls", "--label", label, "--format", "json"); err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	return ss, nil
}

func findSandbox(ctx context.Context, t *toolexec.Tool, run, name string) (*sandboxJSON, error) {
	ss, err := listSandboxes(ctx, t, run)
	if err != nil {
		return nil, err
	}
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i], nil
		}
	}
	return nil, nil
}

// imageID is the id (config digest) of msb's image ref, or "" when msb
// has none: `msb image list --format json`, then `msb image inspect REF
// --format json` (image.rs: reference, digest, config {digest, ...},
// layers).
func imageID(ctx context.Context, t *toolexec.Tool, ref string) (string, error) {
	var ims []struct {
		Reference string `json:"reference"`
	}
	if err := t.JSON(ctx, &ims, "image", "list", "--format", "json"); err != nil {
		return "", fmt.Errorf("listing images: %w", err)
	}
	found := false
	for _, im := range ims {
		found = found || im.Reference == ref
	}
	if !found {
		return "", nil
	}
	var d struct {
		Config *struct {
			Digest string `json:"digest"`
		} `json:"config"`
	}
	if err := t.JSON(ctx, &d, "image", "inspect", ref, "--format", "json"); err != nil {
		return "", fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	if d.Config == nil || d.Config.Digest == "" {
		return "", fmt.Errorf("`msb image inspect %s` names no config digest", ref)
	}
	return d.Config.Digest, nil
}

// Check says whether this host can run the microsandbox target: msb is on
// PATH (tool: a path or a name; empty means DefaultTool) and at least
// MinVersion. The errors wrap ErrToolMissing or ErrToolTooOld.
func Check(ctx context.Context, tool string) error {
	_, err := spec.Check(ctx, tool)
	return err
}

// holder reaches what msb holds: sandboxes by name, images by reference.
type holder struct{}

func (holder) Remove(ctx context.Context, t *toolexec.Tool, e manifests.LedgerEntry) error {
	if e.Kind == manifests.ResourceImage {
		id, err := imageID(ctx, t, e.Key)
		if err != nil || id == "" {
			return err
		}
		_, err = t.Run(ctx, "image", "rm", "--force", e.Key)
		return err
	}
	s, err := findSandbox(ctx, t, e.RunID, e.Key)
	if err != nil || s == nil {
		return err
	}
	_, err = t.Run(ctx, "rm", "--force", e.Key)
	return err
}

func (holder) Exists(ctx context.Context, t *toolexec.Tool, e manifests.LedgerEntry) (bool, string, error) {
	if e.Kind == manifests.ResourceImage {
		id, err := imageID(ctx, t, e.Key)
		return id != "", "in msb's image store as " + id, err
	}
	s, err := findSandbox(ctx, t, e.RunID, e.Key)
	if err != nil || s == nil {
		return false, "", err
	}
	return true, "microVM, " + s.Status, nil
}

// Audit lists the sandboxes carrying the run label.
func (holder) Audit(ctx context.Context, t *toolexec.Tool, run string) ([]provision.Resource, []string, error) {
	ss, err := listSandboxes(ctx, t, run)
	if err != nil {
		return nil, nil, err
	}
	var out []provision.Resource
	for _, s := range ss {
		r := run
		if r == "" {
			// msb ls does not print labels: our names carry the run.
			r = runOfName(s.Name)
		}
		out = append(out, provision.Resource{Run: r, Kind: manifests.ResourceVM, Key: s.Name, Detail: "microVM, " + s.Status + ", labelled " + manifests.RunLabel})
	}
	return out, nil, nil
}

// runOfName reads the run out of a sandbox name SandboxName made.
func runOfName(name string) string {
	s, ok := strings.CutPrefix(name, "sealbench-")
	if !ok {
		return ""
	}
	s, ok = strings.CutSuffix(s, "-vm")
	if !ok || manifests.ValidateRunID(s) != nil {
		return ""
	}
	return s
}
