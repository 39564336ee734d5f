package cells_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/suites/agenttools"
	"github.com/sealbench/sealbench/vmimages"
)

// TestSelect: no --suite is the twelve, unchanged; suites are named,
// their cells picked; what is unknown, repeated or shared is refused.
func TestSelect(t *testing.T) {
	sel, err := cells.Select("", nil, "")
	if err != nil || strings.Join(sel.Names(), ",") != "cells" || !slices.Equal(sel.Cells, cells.Names()) {
		t.Errorf("Select() = %+v, %v; want the twelve", sel, err)
	}
	sel, err = cells.Select("cells,agent-tools", nil, "c01,T4")
	if err != nil || strings.Join(sel.Names(), ",") != "cells,agent-tools" || strings.Join(sel.Cells, ",") != "C01,T4" || sel.Cell("T4").Suite() != agenttools.Suite {
		t.Errorf("Select(cells,agent-tools) = %+v, %v", sel, err)
	}
	if sel, err := cells.Select("agent-tools", nil, ""); err != nil || strings.Join(sel.Cells, ",") != "T1,T2,T3,T4,T5,T6,T7,TASK" {
		t.Errorf("Select(agent-tools) = %+v, %v", sel, err)
	}
	var us *cells.UnknownSuiteError
	if _, err := cells.Select("cells,nope", nil, ""); !errors.As(err, &us) || !strings.Contains(err.Error(), "agent-tools") {
		t.Errorf("an unknown suite: %v", err)
	}
	var uc *cells.UnknownError
	if _, err := cells.Select("agent-tools", nil, "C01"); !errors.As(err, &uc) || !strings.Contains(err.Error(), "agent-tools: T1,T2,T3,T4,T5,T6,T7,TASK") {
		t.Errorf("a cell of a suite not selected: %v", err)
	}
	for _, bad := range []struct{ suites, cells string }{{"cells,cells", ""}, {"agent-tools", "T1,t1"}} {
		if _, err := cells.Select(bad.suites, nil, bad.cells); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("Select(%q, %q): %v", bad.suites, bad.cells, err)
		}
	}
	// A suite of the user's own runs beside the ones named, or alone; it
	// may not take a built-in suite's name, nor a cell id of another.
	mine := userSuite(t, "mine", "M1")
	if sel, err := cells.Select("", []*cells.Suite{mine}, ""); err != nil || strings.Join(sel.Names(), ",") != "mine" || sel.Cells[0] != "M1" {
		t.Errorf("Select with a user's suite alone: %+v, %v", sel, err)
	}
	if _, err := cells.Select("cells", []*cells.Suite{userSuite(t, "agent-tools", "M1")}, ""); err == nil || !strings.Contains(err.Error(), "built-in suite's name") {
		t.Errorf("a user's suite named agent-tools: %v", err)
	}
	if _, err := cells.Select("agent-tools", []*cells.Suite{userSuite(t, "mine", "T1")}, ""); err == nil || !strings.Contains(err.Error(), "cell T1 is suite agent-tools's too") {
		t.Errorf("a user's suite with cell T1: %v", err)
	}
}

func userSuite(t *testing.T, name, id string) *cells.Suite {
	t.Helper()
	def := &manifests.Suite{Kind: manifests.SuiteKind, Name: name, Title: "mine", Cells: []manifests.SuiteCell{{
		ID: id, Title: "one", Body: "b.sh", Verifies: "x", Checks: []manifests.SuiteCheck{{Name: "x", Script: "echo x", Want: "x"}},
	}}}
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	return cells.NewSuite(def, map[string][]byte{"b.sh": []byte("true\n")})
}

// TestSuiteTools: a suite whose tool's package the image's lock does not
// list is refused, naming the command and the package; each built-in
// suite's tools are in the Sandbox image variant its run takes: the
// twelve's image for the twelve, the tools variant (rustc, cargo, nodejs,
// npm) for agent-tools; a package no variant carries is refused, naming
// what each lacks.
func TestSuiteTools(t *testing.T) {
	for _, arch := range vmimages.Arches {
		for _, c := range []struct{ suites, variant string }{
			{"cells", vmimages.VariantSandbox},
			{"agent-tools", vmimages.VariantTools},
			{"cells,agent-tools", vmimages.VariantTools},
		} {
			sel, err := cells.Select(c.suites, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			v, err := vmimages.VariantFor(arch, sel.Packages())
			if err != nil || v != c.variant {
				t.Errorf("%s on %s: image %q, %v; want %s", c.suites, arch, v, err, c.variant)
				continue
			}
			lock, _, err := vmimages.DefaultLock(v, arch)
			if err != nil {
				t.Fatal(err)
			}
			if err := sel.CheckTools(lock.PackageNames()); err != nil {
				t.Errorf("the %s %s image: %v", arch, v, err)
			}
			without := slices.DeleteFunc(lock.PackageNames(), func(p string) bool { return p == "ripgrep" })
			var te *cells.ToolError
			if err := sel.CheckTools(without); c.suites != "cells" && (!errors.As(err, &te) || te.Suite != "agent-tools" || !strings.Contains(err.Error(), "rg (Debian package ripgrep)")) {
				t.Errorf("an image without ripgrep: %v", err)
			}
		}
		if _, err := vmimages.VariantFor(arch, []string{"git", "golang-go"}); err == nil ||
			!strings.Contains(err.Error(), "sandbox lacks golang-go; sandbox-tools lacks golang-go") {
			t.Errorf("a package no image carries: %v", err)
		}
	}
	if err := (&cells.Selection{Suites: []*cells.Suite{cells.Default()}}).CheckTools(nil); err != nil {
		t.Errorf("the twelve need no tool beyond the base: %v", err)
	}
}

// TestSuiteCells runs every cell of every built-in suite but the twelve
// (TestCells runs those) for real with /bin/sh in a plain directory, as
// the runner's native reference does: the base file, the setup, the body;
// requires its verifier to pass there, and to fail once the result is
// tampered with. The cells that build code (T6 cargo, T7 npm, and TASK,
// which runs both) are not run on the host: their verifiers' digests are
// those of Debian's rustc 1.63 and npm 9.2 in the Sandbox image's tools
// variant, so TestRunSuiteOnLocalAndDocker (cmd/sealbench/cmd) runs them
// there.
func TestSuiteCells(t *testing.T) {
	testenv.Short(t, "runs the suites' bodies, writing 64 MiB files")
	ctx := context.Background()
	for _, s := range cells.Suites() {
		if s.Name == manifests.DefaultSuite {
			continue
		}
		for _, tool := range s.Tools {
			if !slices.Contains([]string{"cargo", "rustc", "node", "npm"}, tool.Command) {
				testenv.NeedCommand(t, tool.Command)
			}
		}
		scripts := t.TempDir()
		for name, b := range s.Files {
			if err := os.WriteFile(filepath.Join(scripts, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range s.Cells {
			if s.Name == "agent-tools" && slices.Contains([]string{"T6", "T7", "TASK"}, c.Name) {
				continue
			}
			t.Run(s.Name+"/"+c.Name, func(t *testing.T) {
				stdout, res, dir := cells.RunCell(t, c, scripts)
				if c.Name == "T3" && (res.Files != 256 || res.Bytes != 256<<16) {
					t.Errorf("T3 inventory: %d files, %d bytes", res.Files, res.Bytes)
				}
				if len(stdout) == 0 {
					return // T3 prints nothing: its verifier reads the files alone
				}
				if res, err := c.Verifier().Verify(ctx, cells.LocalShell{Dir: dir}, append([]byte("x\n"), stdout...)); err != nil || res.Pass {
					t.Errorf("verifier passed a changed stdout: %+v, %v", res, err)
				}
			})
		}
	}
}
