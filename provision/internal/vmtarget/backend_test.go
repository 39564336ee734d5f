package vmtarget

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// recorder is a Holder that records what it was asked, and with which tool.
type recorder struct{ calls *[]string }

func (r recorder) note(op string, t *toolexec.Tool, e manifests.LedgerEntry) {
	*r.calls = append(*r.calls, op+" "+e.Name()+" with "+t.Path)
}

func (r recorder) Remove(_ context.Context, t *toolexec.Tool, e manifests.LedgerEntry) error {
	r.note("remove", t, e)
	return nil
}

func (r recorder) Exists(_ context.Context, t *toolexec.Tool, e manifests.LedgerEntry) (bool, string, error) {
	r.note("exists", t, e)
	return true, "there", nil
}

func (r recorder) Audit(_ context.Context, t *toolexec.Tool, run string) ([]runs.Resource, []string, error) {
	*r.calls = append(*r.calls, "audit "+run+" with "+t.Path)
	return []runs.Resource{{Run: run, Kind: manifests.ResourceVM, Key: "sealbench-r-vm"}}, nil, nil
}

var (
	errMissing = errors.New("missing")
	errOld     = errors.New("too old")
)

// newBackend returns a Backend whose tool, on PATH, is "faketool" in a
// fresh directory (and so no tool, until the test makes it), and the
// path a tool named in an entry has.
func newBackend(t *testing.T, calls *[]string) (Backend, string, string) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	onPath := filepath.Join(dir, "faketool")
	named := filepath.Join(t.TempDir(), "faketool")
	if err := os.WriteFile(named, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := Backend{Target: "vmt", Holder: recorder{calls},
		Spec:  toolexec.Spec{Default: "faketool", ErrMissing: errMissing, ErrTooOld: errOld, Install: "install it"},
		Kinds: []manifests.ResourceKind{manifests.ResourceVM, manifests.ResourceImage}}
	return b, onPath, named
}

// TestBackendDispatch: the backend takes vm entries and what the tool
// holds outside any Engine, runs the tool the entry names, falls back to
// PATH only for an entry naming none, and leaves the rest to the generic
// code.
func TestBackendDispatch(t *testing.T) {
	ctx := context.Background()
	var calls []string
	b, onPath, named := newBackend(t, &calls)
	for _, e := range []manifests.LedgerEntry{
		{Kind: manifests.ResourceDir, Key: "/r/vmt"},
		{Kind: manifests.ResourceSocket, Key: "/r/vmt/sock/engine.sock"},
		{Kind: manifests.ResourceProcess, Key: "/r/vmt/sock/engine.sock", Exe: "/bin/sealbench"},
		{Kind: manifests.ResourceImage, Key: "sha256:" + strings.Repeat("a", 64), Engine: "unix:///r/vmt/sock/engine.sock"},
	} {
		if err := b.Remove(ctx, "/r", e); !errors.Is(err, runs.ErrGeneric) {
			t.Errorf("Remove(%s) = %v; want ErrGeneric", e.Name(), err)
		}
		if _, _, err := b.Exists(ctx, "/r", e); !errors.Is(err, runs.ErrGeneric) {
			t.Errorf("Exists(%s) = %v; want ErrGeneric", e.Name(), err)
		}
	}
	vol := manifests.LedgerEntry{Kind: manifests.ResourceVolume, Key: "v", Exe: named}
	if err := b.Remove(ctx, "/r", vol); err == nil || errors.Is(err, runs.ErrGeneric) || !strings.Contains(err.Error(), "faketool holds no volume") {
		t.Errorf("Remove of a volume the tool does not hold: %v", err)
	}

	vm := manifests.LedgerEntry{Kind: manifests.ResourceVM, Key: "sealbench-r-vm", Exe: named}
	img := manifests.LedgerEntry{Kind: manifests.ResourceImage, Key: "sealbench/sandbox:x"} // no exe: the audit's --fix
	if err := b.Remove(ctx, "/r", vm); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := b.Exists(ctx, "/r", vm); err != nil || !ok {
		t.Fatalf("Exists(%s) = %v, %v", vm.Name(), ok, err)
	}
	// No tool on PATH: an entry without exe cannot be removed, and is not there.
	if err := b.Remove(ctx, "/r", img); !errors.Is(err, errMissing) {
		t.Errorf("Remove(%s) with no tool on PATH: %v; want the missing tool", img.Name(), err)
	}
	if ok, _, err := b.Exists(ctx, "/r", img); ok || err != nil {
		t.Errorf("Exists(%s) with no tool on PATH = %v, %v; want false, nil", img.Name(), ok, err)
	}
	if _, notes, err := b.Audit(ctx, ""); err != nil || len(notes) != 1 || !strings.Contains(notes[0], "no `faketool` on PATH") {
		t.Errorf("Audit with no tool on PATH: %v, %q", err, notes)
	}
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, "/r", img); err != nil {
		t.Fatal(err)
	}
	found, _, err := b.Audit(ctx, "r")
	if err != nil || len(found) != 1 || found[0].Target != "vmt" {
		t.Errorf("Audit = %+v, %v; want one resource of target vmt", found, err)
	}
	want := []string{
		"remove vm sealbench-r-vm with " + named,
		"exists vm sealbench-r-vm with " + named,
		"remove image sealbench/sandbox:x with " + onPath,
		"audit r with " + onPath,
	}
	if !slices.Equal(calls, want) {
		t.Errorf("the holder was asked:\n  %s\nwant:\n  %s", strings.Join(calls, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestRegisterPassesAllowUntested: what the VM flags say of untested
// tools and sizes reaches the target's Options, and the registration
// names the releases its tool is checked for and takes the VM flags.
func TestRegisterPassesAllowUntested(t *testing.T) {
	var got Options
	spec := toolexec.Spec{Default: "faketool", Min: toolexec.MustVersion("1.0.0"), Max: toolexec.MustVersion("1.2.2")}
	Register(Registration{Name: "vmt-allow", Spec: spec, CheckName: "faketool",
		Make: func(o Options) (provision.Target, error) { got = o; return nil, nil }})
	r, ok := provision.Lookup("vmt-allow")
	if !ok {
		t.Fatal("not registered")
	}
	if r.Tools != "faketool 1.0.0 to 1.2.2" {
		t.Errorf("Tools = %q", r.Tools)
	}
	if len(r.Options) != 1 || r.Options[0]().Kind() != FlagsKind {
		t.Errorf("the registration's options: %v, want the VM flags", r.Options)
	}
	for _, allow := range []bool{true, false} {
		flags := &Flags{AllowUntestedTool: allow, CPUs: 3, MemoryMiB: 512}
		if _, err := r.New(provision.NewOptions{Options: provision.OptionSet{FlagsKind: flags}}); err != nil {
			t.Fatal(err)
		}
		if got.AllowUntestedTool != allow || got.CPUs != 3 || got.MemoryBytes != 512<<20 {
			t.Errorf("flags %+v made %+v", flags, got)
		}
	}
}
