package microsandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// sandboxJSON is one entry of `msb ls --format json`: superradcompany/
// microsandbox crates/cli/lib/commands/list.rs (v0.6.8 to v0.6.14,
// print_json) prints name, status (SandboxStatus in Debug form,
// crates/db/lib/entity/sandbox.rs: Created, Starting, Running, Draining,
// Paused, Stopped, Crashed), created_at (RFC 3339) and image; no labels.
type sandboxJSON struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	Image     string `json:"image"`
}

// listSandboxes is `msb ls --label sealbench.run=<run> --format json`,
// or every sandbox (`msb ls --format json`) when run is "": a label
// selector without a value matches only the empty value (ui.rs
// parse_label, then filter_sandbox_ids in
// sdk/rust/lib/backend/local/sandbox/mod.rs compares key and value).
func listSandboxes(ctx context.Context, t *toolexec.Tool, run string) ([]sandboxJSON, error) {
	args := []string{"ls", "--format", "json"}
	if run != "" {
		args = []string{"ls", "--label", manifests.RunLabel + "=" + run, "--format", "json"}
	}
	var ss []sandboxJSON
	if err := t.JSON(ctx, &ss, args...); err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	return ss, nil
}

// labelledAnyRun lists the sandboxes carrying the run label with any
// value, and the run of each: msb can select only by key and value, and
// ls prints no labels, so every sandbox whose name SandboxName could have
// made is asked for by the run the name says.
func labelledAnyRun(ctx context.Context, t *toolexec.Tool) (map[string][]sandboxJSON, error) {
	all, err := listSandboxes(ctx, t, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]sandboxJSON{}
	for _, s := range all {
		r := runOfName(s.Name)
		if r == "" || out[r] != nil {
			continue
		}
		ss, err := listSandboxes(ctx, t, r)
		if err != nil {
			return nil, err
		}
		if len(ss) > 0 {
			out[r] = ss
		}
	}
	return out, nil
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
	_, _, err := spec.Check(ctx, tool)
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

// Audit lists the sandboxes carrying the run label (any run's when run
// is "": those labelledAnyRun finds).
func (holder) Audit(ctx context.Context, t *toolexec.Tool, run string) ([]runs.Resource, []string, error) {
	byRun := map[string][]sandboxJSON{}
	var notes []string
	if run != "" {
		ss, err := listSandboxes(ctx, t, run)
		if err != nil {
			return nil, nil, err
		}
		byRun[run] = ss
	} else {
		var err error
		if byRun, err = labelledAnyRun(ctx, t); err != nil {
			return nil, nil, err
		}
		notes = append(notes, "msb selects labels only by value: a sandbox labelled "+manifests.RunLabel+" under a name sealbench did not make is found only by `audit --run`")
	}
	var out []runs.Resource
	for r, ss := range byRun {
		for _, s := range ss {
			out = append(out, runs.Resource{Run: r, Kind: manifests.ResourceVM, Key: s.Name, Detail: "microVM, " + s.Status + ", labelled " + manifests.RunLabel})
		}
	}
	slices.SortFunc(out, func(a, b runs.Resource) int { return strings.Compare(a.Key, b.Key) })
	return out, notes, nil
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
