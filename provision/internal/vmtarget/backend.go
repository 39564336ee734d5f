package vmtarget

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// Holder is what a target's tool holds, as its Backend reaches it. Each
// method gets the tool of the entry (Backend picks it) and only entries
// of the Backend's Kinds.
type Holder interface {
	// Remove removes e's resource, and returns nil when it is absent.
	Remove(ctx context.Context, t *toolexec.Tool, e manifests.LedgerEntry) error
	// Exists reports whether e's resource is there, with a few words.
	Exists(ctx context.Context, t *toolexec.Tool, e manifests.LedgerEntry) (bool, string, error)
	// Audit lists what carries the run label (any run when run is ""),
	// with notes on what could not be checked.
	Audit(ctx context.Context, t *toolexec.Tool, run string) ([]runs.Resource, []string, error)
}

// Backend is the runs.Backend of a target whose tool holds its VMs
// and, as Kinds says, images, volumes or containers outside any Engine.
// It takes the entries of those kinds that name no Engine (vm entries
// always), runs the tool the entry names (its Exe) or, for an entry with
// none (the audit's --fix of a labelled leftover found without a ledger),
// the tool on PATH, and leaves everything else (directories, sockets,
// processes, what lives in an Engine) to the generic code with
// runs.ErrGeneric.
type Backend struct {
	Target string
	Spec   toolexec.Spec
	Kinds  []manifests.ResourceKind // what the tool holds: ResourceVM and more
	Holder Holder
}

var _ runs.Backend = Backend{}

// takes reports whether e is the tool's, and refuses a tool-held entry
// of a kind this tool does not hold.
func (b Backend) takes(e manifests.LedgerEntry) (bool, error) {
	if e.Kind != manifests.ResourceVM && (!e.Kind.OnEngine() || e.Engine != "") {
		return false, nil
	}
	if !slices.Contains(b.Kinds, e.Kind) {
		return false, fmt.Errorf("%s: %s holds no %s", e.Name(), b.Spec.Default, e.Kind)
	}
	return true, nil
}

// tool is the entry's tool, or the tool on PATH when it names none.
func (b Backend) tool(e manifests.LedgerEntry) (*toolexec.Tool, error) {
	p, err := b.Spec.Find(e.Exe)
	if err != nil {
		return nil, err
	}
	return &toolexec.Tool{Path: p}, nil
}

func (b Backend) Remove(ctx context.Context, _ string, e manifests.LedgerEntry) error {
	if ok, err := b.takes(e); !ok {
		return orElse(err, runs.ErrGeneric)
	}
	t, err := b.tool(e)
	if err != nil {
		return fmt.Errorf("cannot remove %s: %w", e.Name(), err)
	}
	return b.Holder.Remove(ctx, t, e)
}

func (b Backend) Exists(ctx context.Context, _ string, e manifests.LedgerEntry) (bool, string, error) {
	if ok, err := b.takes(e); !ok {
		return false, "", orElse(err, runs.ErrGeneric)
	}
	t, err := b.tool(e)
	if errors.Is(err, b.Spec.ErrMissing) {
		return false, "", nil // no tool, nothing of it
	}
	if err != nil {
		return false, "", err
	}
	return b.Holder.Exists(ctx, t, e)
}

func (b Backend) Audit(ctx context.Context, run string) ([]runs.Resource, []string, error) {
	t, err := b.tool(manifests.LedgerEntry{})
	if errors.Is(err, b.Spec.ErrMissing) {
		return nil, []string{fmt.Sprintf("no `%s` on PATH: nothing of %s's can be here", b.Spec.Default, b.Target)}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	found, notes, err := b.Holder.Audit(ctx, t, run)
	for i := range found {
		found[i].Target = b.Target
	}
	return found, notes, err
}

// orElse is err, or def when err is nil.
func orElse(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// Registration is what a VM target's package says about itself; Register
// turns it into the target's provision.Registration.
type Registration struct {
	Name, What, Note string
	Order            int
	Needs            []string // the doctor's checks it needs, its own Check's name last
	Spec             toolexec.Spec
	Kinds            []manifests.ResourceKind // what its tool holds (see Backend)
	Holder           Holder
	// Host, when set, are the doctor's checks of the host the tool needs,
	// made before the tool's.
	Host func(ctx context.Context) []provision.Check
	// Check checks the tool (the doctor's check named CheckName); Fix says
	// what to do about the error it returned.
	CheckName string
	Check     func(ctx context.Context, tool string) error
	Fix       func(err error) string
	// Make makes the target from the options every VM target takes.
	Make func(Options) (provision.Target, error)
	// Help, Examples and Subcommands are the registration's
	// (provision.Registration).
	Help        string
	Examples    []string
	Subcommands []provision.Subcommand
}

// Register registers a VM target: its constructor from the run's options,
// its Backend over its Holder, and its tool's doctor check.
func Register(r Registration) {
	provision.Register(provision.Registration{
		Name: r.Name, What: r.What, Order: r.Order, Needs: r.Needs, Note: r.Note, Tools: r.Spec.Default + " " + r.Spec.Range(),
		Options: []func() provision.Options{NewFlags}, Help: r.Help, Examples: r.Examples, Subcommands: r.Subcommands,
		New: func(o provision.NewOptions) (provision.Target, error) {
			vm := provision.OptionsOf[Flags](o.Options)
			return r.Make(Options{Run: o.Run, Image: o.Image, CPUs: vm.CPUs, MemoryBytes: vm.MemoryBytes(),
				AllowUntestedTool: vm.AllowUntestedTool, Log: o.Log})
		},
		Backend: Backend{Target: r.Name, Spec: r.Spec, Holder: r.Holder, Kinds: r.Kinds},
		Checks: func(ctx context.Context) []provision.Check {
			err := r.Check(ctx, "")
			fix := ""
			if err != nil {
				fix = r.Fix(err)
			}
			var checks []provision.Check
			if r.Host != nil {
				checks = r.Host(ctx)
			}
			return append(checks, provision.ToolCheck(r.CheckName, err, fix))
		},
	})
}
