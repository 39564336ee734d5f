package manifests

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
)

// A suite is a named set of cells: each a body, an optional setup, a base
// and a verifier, with the tools the Sandbox image must carry for them.
// The twelve cells are the default suite, DefaultSuite; other suites are
// a directory holding SuiteFile and the scripts it names, sealed into the
// bundle at suites/NAME/ (docs/suites.md). This is the file's format:
// Load (ParseSuite), then FillDefaults, then Validate, as every document.
const (
	SuiteKind = "sealbench.suite"
	SuiteFile = "suite.json"
	// DefaultSuite is the twelve cells, what a run runs unless told.
	DefaultSuite = "cells"
	// SuitesDir is where suites other than the default sit in a bundle,
	// each in its own directory by name.
	SuitesDir = "suites"
	// MaxSuiteSize bounds suite.json, and MaxSuiteScript each script.
	MaxSuiteSize   = 1 << 20
	MaxSuiteScript = 256 << 10
	// SuiteBaseFile is the one named base a suite's cell can ask for: the
	// 64 MiB pseudo-random base.bin that C09-C11 read (runner/cells).
	SuiteBaseFile = "base.bin"
)

var (
	suiteNameRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	suiteScriptRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.sh$`)
	toolRE        = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`)
)

// ValidSuiteName says whether s can name a suite: lowercase letters,
// digits and '-', starting with a letter.
func ValidSuiteName(s string) bool { return suiteNameRE.MatchString(s) }

// ValidCellName says whether s can name a cell: an uppercase letter, then
// one to fifteen uppercase letters or digits (C01, T1, TASK).
func ValidCellName(s string) bool { return cellNameRE.MatchString(s) }

// Suite is a suite's definition, as suite.json holds it.
type Suite struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Title string `json:"title"`
	// Tools are the commands the suite's scripts run beyond dash,
	// coreutils and findutils, each with the Debian package that carries
	// it: the Sandbox image's package lock must list every one.
	Tools []SuiteTool `json:"tools,omitempty"`
	Cells []SuiteCell `json:"cells"`
}

// SuiteTool is a command and the Debian package that carries it.
type SuiteTool struct {
	Command string `json:"command"`
	Package string `json:"package"`
}

// SuiteCell is one cell of a suite.
type SuiteCell struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Body is the script timed, run with /bin/sh in the workspace as an
	// unprivileged user; Setup, when set, runs untimed in the empty base
	// directory (after Base is put there) and what it leaves is the
	// cell's base Layer, and the native reference's starting directory.
	Body  string `json:"body"`
	Setup string `json:"setup,omitempty"`
	// Base is "" or SuiteBaseFile.
	Base string `json:"base,omitempty"`
	// Verifies says in a line what the verifier checks.
	Verifies string `json:"verifies"`
	// Checks are the verifier: shell checks that must each print Want.
	Checks []SuiteCheck `json:"checks"`
	// MapsFiles says the body mmap(2)s files in the workspace (git does),
	// which gVisor's FUSE cannot serve.
	MapsFiles bool `json:"mapsFiles,omitempty"`
	// Writes is about how many bytes of file data the body writes: the
	// page cache the protocol's prefault makes resident first.
	Writes int64 `json:"writes,omitempty"`
	// LaunchToExit asks for the cell to be timed as a whole task too,
	// from its Sandbox's launch to its exit (Sample.LaunchToExitNs): for
	// a body that is the complete task, as the seed's is.
	LaunchToExit bool `json:"launchToExit,omitempty"`
}

// SuiteCheck is one verifier check: a POSIX sh script run in the
// workspace after the timed run, with the body's standard output on its
// standard input, that must print Want (surrounding white space aside).
type SuiteCheck struct {
	Name   string `json:"name"`
	Script string `json:"script"`
	Want   string `json:"want"`
}

// Scripts are the files the suite names, each once, in the order named.
func (s *Suite) Scripts() []string {
	var out []string
	for _, c := range s.Cells {
		for _, f := range []string{c.Setup, c.Body} {
			if f != "" && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// FillDefaults sets the kind when it is missing.
func (s *Suite) FillDefaults() {
	if s.Kind == "" {
		s.Kind = SuiteKind
	}
}

// Validate reports every problem with s, each naming its field.
func (s *Suite) Validate() error {
	ps := &problems{doc: "suite " + fmt.Sprintf("%q", s.Name)}
	if s.Kind != SuiteKind {
		ps.addf("kind", "is %q, want %q", s.Kind, SuiteKind)
	}
	switch {
	case !ValidSuiteName(s.Name):
		ps.addf("name", "%q is not a suite name (lowercase letters, digits and '-', starting with a letter, at most 32)", s.Name)
	case s.Name == DefaultSuite:
		ps.addf("name", "%q is the built-in twelve cells' name", s.Name)
	}
	if s.Title == "" {
		ps.addf("title", "missing")
	}
	commands := map[string]bool{}
	for i, t := range s.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		if !toolRE.MatchString(t.Command) {
			ps.addf(f+".command", "%q is not a command name", t.Command)
		} else if commands[t.Command] {
			ps.addf(f+".command", "%q is listed twice", t.Command)
		}
		commands[t.Command] = true
		if !toolRE.MatchString(t.Package) {
			ps.addf(f+".package", "%q is not a Debian package name", t.Package)
		}
	}
	if len(s.Cells) == 0 {
		ps.addf("cells", "missing: a suite has at least one cell")
	}
	ids := map[string]bool{}
	for i, c := range s.Cells {
		f := fmt.Sprintf("cells[%d]", i)
		switch {
		case !ValidCellName(c.ID):
			ps.addf(f+".id", "%q is not a cell id (an uppercase letter, then 1 to 15 uppercase letters or digits: T1, TASK)", c.ID)
		case ids[c.ID]:
			ps.addf(f+".id", "%q is listed twice", c.ID)
		}
		ids[c.ID] = true
		if c.Title == "" {
			ps.addf(f+".title", "missing")
		}
		if !suiteScriptRE.MatchString(c.Body) {
			ps.addf(f+".body", "%q is not a script file name (letters, digits, '.', '_', '-', ending in .sh)", c.Body)
		}
		if c.Setup != "" && !suiteScriptRE.MatchString(c.Setup) {
			ps.addf(f+".setup", "%q is not a script file name (letters, digits, '.', '_', '-', ending in .sh)", c.Setup)
		}
		if c.Base != "" && c.Base != SuiteBaseFile {
			ps.addf(f+".base", "%q is not a base: leave it out, or %q", c.Base, SuiteBaseFile)
		}
		if c.Verifies == "" {
			ps.addf(f+".verifies", "missing: say in a line what the verifier checks")
		}
		if len(c.Checks) == 0 {
			ps.addf(f+".checks", "missing: every cell has a verifier, at least one check")
		}
		for j, k := range c.Checks {
			kf := fmt.Sprintf("%s.checks[%d]", f, j)
			if k.Name == "" {
				ps.addf(kf+".name", "missing")
			}
			if k.Script == "" {
				ps.addf(kf+".script", "missing")
			}
			if k.Want == "" {
				ps.addf(kf+".want", "missing: a check says exactly what it must print")
			}
		}
		if c.Writes < 0 {
			ps.addf(f+".writes", "is negative")
		}
	}
	return ps.err()
}

// ParseSuite reads suite.json strictly (bounded, no unknown fields, one
// document), fills its defaults and validates it.
func ParseSuite(b []byte) (*Suite, error) {
	var s Suite
	if err := decodeStrict(bytes.NewReader(b), MaxSuiteSize, "suite.json", &s); err != nil {
		return nil, err
	}
	s.FillDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadSuite reads a suite's directory: suite.json, validated, and every
// script it names, each a regular file of at most MaxSuiteScript bytes.
// A file in the directory that the suite does not name is refused, so
// that what is sealed is exactly what runs. It returns the suite and its
// files by name (suite.json among them).
func LoadSuite(fsys fs.FS) (*Suite, map[string][]byte, error) {
	b, err := readSuiteFile(fsys, SuiteFile, MaxSuiteSize)
	if err != nil {
		return nil, nil, err
	}
	s, err := ParseSuite(b)
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{SuiteFile: b}
	ps := &problems{doc: "suite " + fmt.Sprintf("%q", s.Name)}
	for _, name := range s.Scripts() {
		data, err := readSuiteFile(fsys, name, MaxSuiteScript)
		if err != nil {
			ps.addf(name, "%v", err)
			continue
		}
		files[name] = data
	}
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, nil, fmt.Errorf("listing the suite's directory: %w", err)
	}
	for _, e := range ents {
		if _, named := files[e.Name()]; !named && !isSuiteSource(e.Name()) {
			ps.addf(e.Name(), "is in the suite's directory but suite.json names no such script: remove it, or name it")
		}
	}
	if err := ps.err(); err != nil {
		return nil, nil, err
	}
	return s, files, nil
}

// isSuiteSource says a file beside a built-in suite's scripts is its Go
// package (the code that embeds and registers it), not part of the suite.
func isSuiteSource(name string) bool { return path.Ext(name) == ".go" }

func readSuiteFile(fsys fs.FS, name string, limit int64) ([]byte, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("reading the suite: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("reading the suite: %s is not a regular file", name)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("reading the suite: %s is %d bytes, more than %d", name, fi.Size(), limit)
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("reading the suite: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("reading the suite: %s grew past %d bytes", name, limit)
	}
	return b, nil
}

// suiteNames checks a list of suite names: each valid, none twice.
func (ps *problems) suiteNames(field string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case !ValidSuiteName(n):
			ps.addf(fmt.Sprintf("%s[%d]", field, i), "%q is not a suite name", n)
		case seen[n]:
			ps.addf(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", n)
		}
		seen[n] = true
	}
}

// suiteDefs checks the suite definitions a plan or pins carry: each
// valid, and each of a suite names lists.
func (ps *problems) suiteDefs(field string, defs []Suite, names []string) {
	for i := range defs {
		if err := defs[i].Validate(); err != nil {
			ps.addf(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		} else if !slices.Contains(names, defs[i].Name) {
			ps.addf(fmt.Sprintf("%s[%d]", field, i), "defines suite %q, which suites does not name", defs[i].Name)
		}
	}
}
