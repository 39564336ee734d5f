//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	_ "github.com/sealbench/sealbench/runner/suites" // every built-in suite's registration
	"github.com/sealbench/sealbench/vmimages"
)

// suiteInfo is one suite as `sealbench suites --json` lists it.
type suiteInfo struct {
	Name  string                `json:"name"`
	Title string                `json:"title"`
	Dir   string                `json:"dir"` // in the bundle
	Tools []manifests.SuiteTool `json:"tools"`
	// Image is the Sandbox image variant a run of the suite loads: the
	// smallest that carries its tools (vmimages.VariantFor).
	Image string     `json:"image"`
	Cells []cellInfo `json:"cells"`
}

type cellInfo struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Verifies string `json:"verifies"`
	Setup    string `json:"setup,omitempty"`
	Base     string `json:"base,omitempty"`
	// LaunchToExit: the cell is timed from its Sandbox's launch to its
	// exit too.
	LaunchToExit bool `json:"launchToExit,omitempty"`
}

func newSuitesCmd(g *global) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "suites [--suite-dir DIR]",
		Short: "List the suites of cells a run can run, with their cells and the tools they need",
		Long: `List the suites: the twelve filesystem cells (cells, the default) and every
other built-in suite, each with its cells (id, title, what the verifier checks)
the tools the Sandbox image must carry for it, and the image variant a run of
it loads: sandbox (the twelve's tools), or sandbox-tools (those, and rustc,
cargo, nodejs and npm). With --suite-dir, check a suite of your own
(suite.json and its scripts, docs/suites.md) as run and seal would, and list
it: exit 3 with every problem named when it is not valid, or when it needs a
package no Sandbox image carries.`,
		Example: `  sealbench suites
  sealbench suites --json
  sealbench suites --suite-dir ./my-suite`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			list := cells.Suites()
			if dir != "" {
				s, err := loadSuiteDir(dir)
				if err != nil {
					return err
				}
				list = []*cells.Suite{s}
			}
			var out []suiteInfo
			for _, s := range list {
				si, err := describeSuite(s)
				if err != nil {
					return err
				}
				out = append(out, si)
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			for i, s := range out {
				if i > 0 {
					fmt.Fprintln(g.stdout)
				}
				writeSuite(g, s)
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "suite-dir", "", "a suite of your own to check and list: a directory with suite.json and its scripts")
	return c
}

// loadSuiteDir reads and checks a user's suite directory; what is wrong
// with it is bad input.
func loadSuiteDir(dir string) (*cells.Suite, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, usageErrorf("--suite-dir takes a directory holding suite.json and its scripts (docs/suites.md)", "--suite-dir %s is not a directory", dir)
	}
	s, err := cells.LoadSuite(os.DirFS(dir))
	if err != nil {
		return nil, usageErrorf("docs/suites.md describes suite.json; sealbench suites --suite-dir DIR checks one", "suite %s: %v", dir, err)
	}
	if _, err := suiteImage(s); err != nil {
		return nil, usageErrorf("a suite's tools come from Debian packages the Sandbox images carry: sealbench suites lists them; docs/suites.md", "suite %s: %v", dir, err)
	}
	return s, nil
}

// suiteImage is the Sandbox image variant a run of s alone loads on this
// machine's architecture.
func suiteImage(s *cells.Suite) (string, error) {
	return vmimages.VariantFor(runtime.GOARCH, (&cells.Selection{Suites: []*cells.Suite{s}}).Packages())
}

func describeSuite(s *cells.Suite) (suiteInfo, error) {
	image, err := suiteImage(s)
	if err != nil {
		return suiteInfo{}, err
	}
	si := suiteInfo{Name: s.Name, Title: s.Title, Dir: s.Dir, Tools: s.Tools, Image: image, Cells: []cellInfo{}}
	if si.Tools == nil {
		si.Tools = []manifests.SuiteTool{}
	}
	for _, c := range s.Cells {
		si.Cells = append(si.Cells, cellInfo{ID: c.Name, Title: c.Title, Verifies: c.Verifies, Setup: c.Setup, Base: c.Base, LaunchToExit: c.LaunchToExit})
	}
	return si, nil
}

func writeSuite(g *global, s suiteInfo) {
	name := s.Name
	if name == manifests.DefaultSuite {
		name += " (default)"
	}
	fmt.Fprintf(g.stdout, "%s: %s\n", name, s.Title)
	if len(s.Tools) > 0 {
		var tools []string
		for _, t := range s.Tools {
			tools = append(tools, t.Command+" ("+t.Package+")")
		}
		fmt.Fprintf(g.stdout, "  needs in the Sandbox image: %s\n", strings.Join(tools, ", "))
	}
	fmt.Fprintf(g.stdout, "  Sandbox image: %s\n", s.Image)
	for _, c := range s.Cells {
		fmt.Fprintf(g.stdout, "  %-4s %s\n       verifier: %s\n", c.ID, c.Title, c.Verifies)
		if c.LaunchToExit {
			fmt.Fprintf(g.stdout, "       also timed from the Sandbox's launch to its exit\n")
		}
	}
}
