// Package vmtest holds the test helpers that the VM targets' tests share:
// the fake tool on PATH, a fresh run torn down after the test, and checks
// on the command lines the fake ran and on the run's ledger; and the test
// binary serving a target's hidden command (Main, Self).
package vmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/toolexec/faketool"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/vmimages"
)

// FakeTool puts the fake tool (faketool.Container or faketool.Msb) first
// on PATH, with a fresh state whose image /opt/sealbench is opt, and
// returns the fake's state directory.
func FakeTool(t *testing.T, tool, opt string) string {
	t.Helper()
	bin := t.TempDir()
	if err := faketool.Install(bin, tool); err != nil {
		t.Fatal(err)
	}
	state := testenv.ShortTempDir(t, "fk") // guest sockets live under it
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(faketool.StateEnv, state)
	t.Setenv(faketool.OptEnv, opt)
	return state
}

// ToolPath is the path of tool on PATH, as error messages and the ledger
// name it.
func ToolPath(t *testing.T, tool string) string {
	t.Helper()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Lstat(filepath.Join(d, tool)); err == nil {
			return filepath.Join(d, tool)
		}
	}
	t.Fatalf("no %s on PATH", tool)
	return ""
}

// NeedVMImage skips unless the VM image `make vm-image` builds for this
// host (vmimages.DefaultVM) is in the cache, saying that the command build
// builds it; it returns the image's directory.
func NeedVMImage(t *testing.T, build string) string {
	t.Helper()
	dir, err := vmimages.DefaultVM()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vmimages.LoadVM(dir); err != nil {
		testenv.Skip(t, "%v (`%s` builds it)", err, build)
	}
	return dir
}

// Calls returns the command lines the fake in state directory fk ran.
func Calls(t *testing.T, fk string) [][]string {
	t.Helper()
	calls, err := faketool.Calls(fk)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// Ran reports whether calls hold want, argument for argument.
func Ran(calls [][]string, want ...string) bool {
	return slices.ContainsFunc(calls, func(c []string) bool { return slices.Equal(c, want) })
}

// WantRan fails t for each of want the fake in fk never ran.
func WantRan(t *testing.T, fk string, want ...[]string) {
	t.Helper()
	calls := Calls(t, fk)
	for _, w := range want {
		if !Ran(calls, w...) {
			t.Errorf("never ran %q; ran:\n%s", w, Render(calls))
		}
	}
}

// Render lists calls, one a line.
func Render(calls [][]string) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString("  " + strings.Join(c, " ") + "\n")
	}
	return b.String()
}

// Entry is a ledger entry as the tests compare it: what it names and
// where that lives, without the sequence, the time or the words.
func Entry(e manifests.LedgerEntry) string {
	s := fmt.Sprintf("%s %s", e.Kind, e.Key)
	if e.Engine != "" {
		s += " engine=" + e.Engine
	}
	if e.Exe != "" {
		s += " exe=" + e.Exe
	}
	if l := e.Labels[manifests.RunLabel]; l != "" {
		s += " " + manifests.RunLabel + "=" + l
	}
	return s
}

// WantLedger checks that the run's ledger holds, for target, exactly want
// (as Entry writes them), in order.
func WantLedger(t *testing.T, run *runs.Run, target string, want ...string) {
	t.Helper()
	var got []string
	for _, e := range run.Ledger.Entries() {
		if e.Target == target {
			got = append(got, Entry(e))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the ledger's %s entries:\n  %s\nwant:\n  %s", target, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Target is a VM target under test, with the fake tool it drives.
type Target struct {
	Name string // the target's name
	Tool string // the fake to put on PATH: faketool.Container or faketool.Msb
	// New returns the target of run, creating nothing.
	New func(t *testing.T, run *runs.Run, img engine.Image) provision.Target
}

// Env is one test's world: the test bundle, the fake tool, a run and its
// target, not created yet.
type Env struct {
	Bundle *provisiontest.Bundle
	Fake   string // the fake's state directory
	State  string // the run's state directory
	Run    *runs.Run
	Target provision.Target
}

// Setup makes an Env: the fake's image /opt/sealbench is the test
// bundle, so that its VMs run the real stand-in.
func (tt Target) Setup(t *testing.T) *Env {
	t.Helper()
	b := provisiontest.GetBundle(t)
	e := &Env{Bundle: b, Fake: FakeTool(t, tt.Tool, b.Dir)}
	e.Run, e.State = provisiontest.NewRun(t)
	e.Target = tt.New(t, e.Run, b.Image)
	return e
}

// Conformance runs provisiontest's suite against the fake tool.
func (tt Target) Conformance(t *testing.T) {
	testenv.NeedRoot(t) // the stand-in makes namespaces
	b := provisiontest.GetBundle(t)
	FakeTool(t, tt.Tool, b.Dir)
	provisiontest.Run(t, &provisiontest.Suite{
		New:    func(t *testing.T, run *runs.Run) provision.Target { return tt.New(t, run, b.Image) },
		Image:  b.Image,
		Engine: manifests.EngineStandin,
	})
}

// FailedCreateRollsBack makes the fake's command fail ("<tool>
// <subcommand>", as faketool.FailEnv), and checks that Create's error
// names the command line (wantCmd, after the tool's path) and the tool's
// message, that the Inventory then lists the Sandbox image the tool holds
// (loaded before), that teardown of the run leaves nothing the audit
// finds, and that the fake ran removal.
func (tt Target) FailedCreateRollsBack(t *testing.T, fail, wantCmd string, removal ...[]string) *Env {
	t.Helper()
	e := tt.Setup(t)
	t.Setenv(faketool.FailEnv, fail)
	ctx := context.Background()
	err := e.Target.Create(ctx)
	if err == nil || !strings.Contains(err.Error(), "`"+ToolPath(t, tt.Tool)+" "+wantCmd) || !strings.Contains(err.Error(), "(injected)") {
		t.Fatalf("Create with a failing `%s`: %v; want the command line and the tool's message", fail, err)
	}
	t.Setenv(faketool.FailEnv, "")
	inv, err := e.Target.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(inv, func(r runs.Resource) bool {
		return r.Target == tt.Name && r.Kind == manifests.ResourceImage && r.Key == e.Bundle.Image.Ref
	}) {
		t.Errorf("the Sandbox image the tool holds is not in the inventory: %v", inv)
	}
	if _, err := runs.Teardown(ctx, e.Run.Dir, runs.TeardownOptions{Log: t.Logf}); err != nil {
		t.Fatal(err)
	}
	e.WantClean(t, tt.Name)
	WantRan(t, e.Fake, removal...)
	return e
}

// WantClean checks that the audit of target finds nothing.
func (e *Env) WantClean(t *testing.T, target string) {
	t.Helper()
	res, err := runs.Audit(context.Background(), runs.AuditOptions{StateDir: e.State, Targets: []string{target}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) > 0 {
		t.Errorf("audit: %v", res.Leftovers)
	}
}

// LoseRunThenFix removes the run's directory, ledger and all, as a crash
// and a careless rm -rf would leave it; the audit must then find the VM
// by its label, and --fix remove it.
func (tt Target) LoseRunThenFix(t *testing.T, e *Env, vm string) {
	t.Helper()
	ctx := context.Background()
	e.Run.Close()
	if err := os.RemoveAll(e.Run.Dir); err != nil {
		t.Fatal(err)
	}
	opts := runs.AuditOptions{StateDir: e.State, Targets: []string{tt.Name}}
	res, err := runs.Audit(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Leftovers, func(r runs.Resource) bool {
		return r.Kind == manifests.ResourceVM && r.Key == vm && r.Run == e.Run.ID
	}) {
		t.Fatalf("audit does not find the labelled VM %s: %+v", vm, res)
	}
	after, err := runs.Fix(ctx, opts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Leftovers) > 0 {
		t.Errorf("after --fix: %v", after.Leftovers)
	}
}
