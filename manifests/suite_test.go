package manifests

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

const goodSuite = `{
  "kind": "sealbench.suite",
  "name": "mine",
  "title": "my suite",
  "tools": [{"command": "rg", "package": "ripgrep"}],
  "cells": [
    {"id": "M1", "title": "one", "setup": "setup.sh", "body": "M1.sh", "verifies": "one file",
     "checks": [{"name": "one file", "script": "find . -type f | wc -l", "want": "1"}]}
  ]
}`

func suiteFS(suiteJSON string) fstest.MapFS {
	return fstest.MapFS{
		SuiteFile:  {Data: []byte(suiteJSON)},
		"M1.sh":    {Data: []byte("echo > f\n")},
		"setup.sh": {Data: []byte("true\n")},
	}
}

func TestLoadSuite(t *testing.T) {
	s, files, err := LoadSuite(suiteFS(goodSuite))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "mine" || len(s.Cells) != 1 || len(files) != 3 || string(files["M1.sh"]) != "echo > f\n" {
		t.Errorf("LoadSuite: %+v %v", s, files)
	}
	if got := strings.Join(s.Scripts(), ","); got != "setup.sh,M1.sh" {
		t.Errorf("Scripts = %s", got)
	}
}

// TestSuiteValidation: every problem of a suite.json is reported, each
// naming its field: bad ids, a cell with no verifier, a bad tool, and the
// rest.
func TestSuiteValidation(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		fields         []string
	}{
		{"bad id", `"id": "M1"`, `"id": "m-1"`, []string{"cells[0].id"}},
		{"no verifier", `"checks": [{"name": "one file", "script": "find . -type f | wc -l", "want": "1"}]`, `"checks": []`, []string{"cells[0].checks"}},
		{"check wants nothing", `"want": "1"`, `"want": ""`, []string{"cells[0].checks[0].want"}},
		{"bad tool", `"package": "ripgrep"`, `"package": "rip grep"`, []string{"tools[0].package"}},
		{"the default's name", `"name": "mine"`, `"name": "cells"`, []string{"name"}},
		{"bad name", `"name": "mine"`, `"name": "My Suite"`, []string{"name"}},
		{"body that leaves the directory", `"body": "M1.sh"`, `"body": "../M1.sh"`, []string{"cells[0].body"}},
		{"unknown base", `"verifies": "one file"`, `"verifies": "one file", "base": "other.bin"`, []string{"cells[0].base"}},
		{"every problem at once", `"title": "one", "setup": "setup.sh", "body": "M1.sh", "verifies": "one file"`, `"title": "", "body": "M1", "verifies": ""`,
			[]string{"cells[0].title", "cells[0].body", "cells[0].verifies"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodSuite, tc.from) {
				t.Fatalf("the good suite has no %s", tc.from)
			}
			_, err := ParseSuite([]byte(strings.Replace(goodSuite, tc.from, tc.to, 1)))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ParseSuite: %v, want a ValidationError", err)
			}
			for _, f := range tc.fields {
				found := false
				for _, p := range ve.Problems {
					found = found || p.Field == f
				}
				if !found {
					t.Errorf("no problem names %s: %v", f, err)
				}
			}
			if len(ve.Problems) != len(tc.fields) {
				t.Errorf("%d problems, want %d: %v", len(ve.Problems), len(tc.fields), err)
			}
		})
	}
	if _, err := ParseSuite([]byte(strings.Replace(goodSuite, `"kind"`, `"kinds"`, 1))); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("an unknown field: %v", err)
	}
}

// TestLoadSuiteFiles: the scripts suite.json names must be there, and
// nothing else may be.
func TestLoadSuiteFiles(t *testing.T) {
	missing := suiteFS(goodSuite)
	delete(missing, "setup.sh")
	if _, _, err := LoadSuite(missing); err == nil || !strings.Contains(err.Error(), "setup.sh") {
		t.Errorf("a missing setup: %v", err)
	}
	extra := suiteFS(goodSuite)
	extra["M2.sh"] = &fstest.MapFile{Data: []byte("rm -rf /\n")}
	if _, _, err := LoadSuite(extra); err == nil || !strings.Contains(err.Error(), "M2.sh") {
		t.Errorf("a script suite.json does not name: %v", err)
	}
	dir := suiteFS(goodSuite)
	dir["M1.sh"] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
	if _, _, err := LoadSuite(dir); err == nil || !strings.Contains(err.Error(), "M1.sh is not a regular file") {
		t.Errorf("a body that is a directory: %v", err)
	}
	if _, _, err := LoadSuite(fstest.MapFS{}); err == nil || !strings.Contains(err.Error(), SuiteFile) {
		t.Errorf("no suite.json: %v", err)
	}
}

func TestPlanAndPinsNameSuites(t *testing.T) {
	p := validPlan()
	p.Suites = []string{"cells", "cells"}
	def, _ := ParseSuite([]byte(goodSuite))
	p.SuiteDefs = []Suite{*def}
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), "suites[1]") || !strings.Contains(err.Error(), `suiteDefs[0]: defines suite "mine"`) {
		t.Errorf("plan with a suite twice and an unnamed definition: %v", err)
	}
	var pins RunPins
	pins.FillDefaults()
	if len(pins.Suites) != 1 || pins.Suites[0] != DefaultSuite {
		t.Errorf("pins without suites name %v, want the default", pins.Suites)
	}
	s := Sample{Cell: "T1", Suite: "Agent Tools"}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "suite:") || strings.Contains(err.Error(), "cell:") {
		t.Errorf("sample of cell T1 in a bad suite: %v", err)
	}
}
