package cells

import (
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sealbench/sealbench/manifests"
)

// Suite is a named set of cells: the twelve (the default suite,
// manifests.DefaultSuite) or another, defined by a suite.json
// (manifests.Suite) beside its scripts. A suite's package registers it
// from init (Register); package runner/suites links every built-in one,
// as provision/targets links the targets.
type Suite struct {
	Name  string
	Title string
	// Dir is where the suite's scripts sit in the bundle: cells/ for the
	// twelve, suites/NAME/ for the others.
	Dir string
	// Tools are the commands the suite runs beyond dash, coreutils and
	// findutils, each with the Debian package that carries it.
	Tools []manifests.SuiteTool
	Cells []*Cell // in order
	// Def is the suite's definition, nil for the twelve; Files are its
	// files by name (suite.json and its scripts), as sealed.
	Def   *manifests.Suite
	Files map[string][]byte
}

// Cell returns the suite's cell with id, or nil.
func (s *Suite) Cell(id string) *Cell {
	for _, c := range s.Cells {
		if c.Name == id {
			return c
		}
	}
	return nil
}

// CellNames are the suite's cell ids, in order.
func (s *Suite) CellNames() []string {
	out := make([]string, len(s.Cells))
	for i, c := range s.Cells {
		out[i] = c.Name
	}
	return out
}

// NewSuite makes a suite from its definition and files (as
// manifests.LoadSuite returns them): its cells run the scripts sealed at
// suites/NAME/, verified by the definition's checks.
func NewSuite(def *manifests.Suite, files map[string][]byte) *Suite {
	s := &Suite{Name: def.Name, Title: def.Title, Dir: manifests.SuitesDir + "/" + def.Name, Tools: def.Tools, Def: def, Files: files}
	for _, dc := range def.Cells {
		checks := slices.Clone(dc.Checks)
		s.Cells = append(s.Cells, &Cell{
			Name: dc.ID, Title: dc.Title, Body: dc.Body, Setup: dc.Setup, Base: dc.Base, Verifies: dc.Verifies,
			MapsFiles: dc.MapsFiles, Writes: dc.Writes, LaunchToExit: dc.LaunchToExit, suite: s,
			checks: func() []Check { return checks },
		})
	}
	return s
}

// LoadSuite reads a suite's directory (manifests.LoadSuite) and makes
// the suite.
func LoadSuite(fsys fs.FS) (*Suite, error) {
	def, files, err := manifests.LoadSuite(fsys)
	if err != nil {
		return nil, err
	}
	return NewSuite(def, files), nil
}

var (
	regMu    sync.Mutex
	registry = map[string]*Suite{}
)

// Register adds a built-in suite. It panics on a suite that is invalid
// or named twice, or a cell id another suite has: those are bugs in the
// suite's package, and the registry test finds them.
func Register(s *Suite) {
	regMu.Lock()
	defer regMu.Unlock()
	if err := checkNew(s, registry); err != nil {
		panic("cells: registering suite " + s.Name + ": " + err.Error())
	}
	registry[s.Name] = s
}

// checkNew says why s cannot join suites: a name taken, or a cell id
// another of them has.
func checkNew(s *Suite, suites map[string]*Suite) error {
	if !manifests.ValidSuiteName(s.Name) || s.Title == "" || len(s.Cells) == 0 {
		return fmt.Errorf("suite %q needs a valid name, a title and cells", s.Name)
	}
	if _, dup := suites[s.Name]; dup {
		return fmt.Errorf("there is a suite %q already", s.Name)
	}
	for _, other := range suites {
		for _, c := range s.Cells {
			if other.Cell(c.Name) != nil {
				return fmt.Errorf("its cell %s is suite %s's too: cell ids are unique across the suites of a run", c.Name, other.Name)
			}
		}
	}
	return nil
}

// Suites returns the built-in suites: the default first, then by name.
func Suites() []*Suite {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]*Suite, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Name == manifests.DefaultSuite) != (out[j].Name == manifests.DefaultSuite) {
			return out[i].Name == manifests.DefaultSuite
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// SuiteNames are the built-in suites' names, as Suites orders them.
func SuiteNames() []string {
	var out []string
	for _, s := range Suites() {
		out = append(out, s.Name)
	}
	return out
}

// UnknownSuiteError names a suite that is neither built in nor given.
type UnknownSuiteError struct{ Name string }

func (e *UnknownSuiteError) Error() string {
	return fmt.Sprintf("unknown suite %q (the suites are %s; a directory of your own: --suite-dir)", e.Name, strings.Join(SuiteNames(), ", "))
}

// LookupSuite returns the built-in suite name, or an *UnknownSuiteError.
func LookupSuite(name string) (*Suite, error) {
	regMu.Lock()
	s, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return nil, &UnknownSuiteError{Name: name}
	}
	return s, nil
}

// Selection is what a run runs: its suites, in the order asked for, and
// the cells of them it runs.
type Selection struct {
	Suites []*Suite
	Cells  []string
}

// Names are the selection's suite names.
func (sel *Selection) Names() []string {
	out := make([]string, len(sel.Suites))
	for i, s := range sel.Suites {
		out[i] = s.Name
	}
	return out
}

// Defs are the definitions of the selected suites that have one (all
// but the twelve).
func (sel *Selection) Defs() []manifests.Suite {
	var out []manifests.Suite
	for _, s := range sel.Suites {
		if s.Def != nil {
			out = append(out, *s.Def)
		}
	}
	return out
}

// Cell returns the selected suites' cell id, and nil when none has it.
func (sel *Selection) Cell(id string) *Cell {
	for _, s := range sel.Suites {
		if c := s.Cell(id); c != nil {
			return c
		}
	}
	return nil
}

// Select resolves a run's --suite (comma-separated suite names; "" is the
// default suite) with extra suites of the user's own (--suite-dir), which
// run besides the ones named, and its --cells ("" or "all": every cell of
// those suites). It refuses unknown and repeated suites and cells, a cell
// of no selected suite, and two suites sharing a cell id.
func Select(suiteList string, extra []*Suite, cellList string) (*Selection, error) {
	sel := &Selection{}
	chosen := map[string]*Suite{}
	add := func(s *Suite) error {
		if err := checkNew(s, chosen); err != nil {
			return fmt.Errorf("suite %s: %w", s.Name, err)
		}
		chosen[s.Name] = s
		sel.Suites = append(sel.Suites, s)
		return nil
	}
	if suiteList != "" || len(extra) == 0 {
		if suiteList == "" {
			suiteList = manifests.DefaultSuite
		}
		for _, n := range strings.Split(suiteList, ",") {
			n = strings.TrimSpace(n)
			if _, dup := chosen[n]; dup {
				return nil, fmt.Errorf("suite %s is listed twice", n)
			}
			s, err := LookupSuite(n)
			if err != nil {
				return nil, err
			}
			if err := add(s); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range extra {
		if _, err := LookupSuite(s.Name); err == nil {
			return nil, fmt.Errorf("suite %s from a directory has a built-in suite's name: rename it", s.Name)
		}
		if err := add(s); err != nil {
			return nil, err
		}
	}
	if cellList == "" || cellList == "all" {
		for _, s := range sel.Suites {
			sel.Cells = append(sel.Cells, s.CellNames()...)
		}
		return sel, nil
	}
	for _, n := range strings.Split(cellList, ",") {
		n = strings.ToUpper(strings.TrimSpace(n))
		if sel.Cell(n) == nil {
			var all []string
			for _, s := range sel.Suites {
				all = append(all, s.Name+": "+strings.Join(s.CellNames(), ","))
			}
			return nil, &UnknownError{Name: n, In: strings.Join(all, "; ")}
		}
		if slices.Contains(sel.Cells, n) {
			return nil, fmt.Errorf("cell %s is listed twice", n)
		}
		sel.Cells = append(sel.Cells, n)
	}
	return sel, nil
}

// ToolError says the Sandbox image lacks a package a suite needs.
type ToolError struct {
	Suite   string
	Missing []manifests.SuiteTool
}

func (e *ToolError) Error() string {
	var b strings.Builder
	for i, t := range e.Missing {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (Debian package %s)", t.Command, t.Package)
	}
	return fmt.Sprintf("suite %s runs %s, which the Sandbox image does not carry: its package lock does not list it (add the package to the lock's roots: sealbench image lock)", e.Suite, b.String())
}

// Packages are the Debian packages the selected suites' tools come from,
// each once, in the suites' order.
func (sel *Selection) Packages() []string {
	var out []string
	for _, s := range sel.Suites {
		for _, t := range s.Tools {
			if !slices.Contains(out, t.Package) {
				out = append(out, t.Package)
			}
		}
	}
	return out
}

// CheckTools says whether an image whose package lock lists packages
// carries every tool the selected suites need, naming what is missing.
func (sel *Selection) CheckTools(packages []string) error {
	for _, s := range sel.Suites {
		var missing []manifests.SuiteTool
		for _, t := range s.Tools {
			if !slices.Contains(packages, t.Package) {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			return &ToolError{Suite: s.Name, Missing: missing}
		}
	}
	return nil
}

// Default is the default suite, the twelve cells.
func Default() *Suite {
	s, err := LookupSuite(manifests.DefaultSuite)
	if err != nil {
		panic(err) // registered by this package's init
	}
	return s
}

// SealedIn says whether the bundle whose manifest is m holds the suite as
// its files are: each at Dir with its digest, and nothing else there. A
// user's suite runs from a bundle only when it does.
func (s *Suite) SealedIn(m *manifests.BundleManifest) error {
	prefix := s.Dir + "/"
	for name, b := range s.Files {
		f, ok := m.File(prefix + name)
		switch {
		case !ok:
			return fmt.Errorf("the bundle does not hold suite %s: no %s%s", s.Name, prefix, name)
		case f.Digest != manifests.DigestOf(b):
			return fmt.Errorf("the bundle's %s%s is not the suite's %s: the suite changed since it was sealed", prefix, name, name)
		}
	}
	for _, f := range m.Files {
		if rest, ok := strings.CutPrefix(f.Path, prefix); ok && s.Files[rest] == nil {
			return fmt.Errorf("the bundle's suite %s holds %s, which the suite's directory does not", s.Name, f.Path)
		}
	}
	return nil
}
