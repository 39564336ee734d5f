//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSuitesCommand: `sealbench suites` lists the twelve (the default)
// and agent-tools with their cells, verifiers, tools and Sandbox image;
// --json the same as data; --suite-dir checks a suite of one's own, and
// refuses a bad one, or one needing a package no image carries, with exit
// 3, every problem named.
func TestSuitesCommand(t *testing.T) {
	code, stdout, stderr := run(t, "suites")
	if code != ExitOK || !strings.Contains(stdout, "cells (default): the twelve filesystem cells") ||
		!strings.Contains(stdout, "  C12  git init, 100 files, add, commit\n       verifier: one commit") ||
		!strings.Contains(stdout, "agent-tools: ") || !strings.Contains(stdout, "needs in the Sandbox image: git (git), rg (ripgrep)") ||
		!strings.Contains(stdout, "  T5   rg over 2,048 files") || !strings.Contains(stdout, "cargo (cargo), rustc (rustc), node (nodejs), npm (npm)\n  Sandbox image: sandbox-tools\n") ||
		!strings.Contains(stdout, "  TASK T1 to T7 in one window, one Sandbox\n       verifier: each operation's output and result as T1 to T7's verifiers check them; the tree, the repository, the sources and base.bin unchanged\n       also timed from the Sandbox's launch to its exit\n") {
		t.Errorf("suites: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = run(t, "suites", "--json")
	var list []suiteInfo
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != ExitOK || len(list) < 2 {
		t.Fatalf("suites --json: exit %d, %v\n%s", code, err, stdout)
	}
	if list[0].Name != "cells" || len(list[0].Cells) != 12 || list[0].Dir != "cells" || list[1].Name != "agent-tools" ||
		list[1].Dir != "suites/agent-tools" || len(list[1].Cells) != 8 || list[1].Cells[0].Setup != "setup-tree.sh" || list[1].Cells[1].Base != "base.bin" ||
		list[0].Image != "sandbox" || list[1].Image != "sandbox-tools" || !list[1].Cells[7].LaunchToExit || list[1].Cells[6].LaunchToExit {
		t.Errorf("suites --json: %+v", list)
	}

	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("suite.json", `{"kind": "sealbench.suite", "name": "mine", "title": "mine", "tools": [{"command": "rg", "package": "ripgrep"}],
		"cells": [{"id": "M1", "title": "one file", "body": "M1.sh", "verifies": "one file",
		"checks": [{"name": "one file", "script": "find . -type f | wc -l", "want": "1"}]}]}`)
	write("M1.sh", "echo one >f\n")
	code, stdout, stderr = run(t, "suites", "--suite-dir", dir)
	if code != ExitOK || !strings.Contains(stdout, "mine: mine\n  needs in the Sandbox image: rg (ripgrep)\n  Sandbox image: sandbox\n  M1   one file") {
		t.Errorf("suites --suite-dir: exit %d\n%s%s", code, stdout, stderr)
	}
	// A tool no Sandbox image carries: refused, naming what each lacks.
	write("suite.json", `{"kind": "sealbench.suite", "name": "mine", "title": "mine", "tools": [{"command": "make", "package": "make"}],
		"cells": [{"id": "M1", "title": "one file", "body": "M1.sh", "verifies": "one file",
		"checks": [{"name": "one file", "script": "find . -type f | wc -l", "want": "1"}]}]}`)
	code, _, stderr = run(t, "suites", "--suite-dir", dir)
	if code != ExitUnusable || !strings.Contains(stderr, "no Sandbox image carries the packages the suites need (sandbox lacks make; sandbox-tools lacks make)") {
		t.Errorf("suites --suite-dir with a tool no image carries: exit %d\n%s", code, stderr)
	}
	write("suite.json", `{"kind": "sealbench.suite", "name": "mine", "title": "mine",
		"cells": [{"id": "m1", "title": "one file", "body": "M1.sh", "verifies": "one file", "checks": []}]}`)
	code, _, stderr = run(t, "suites", "--suite-dir", dir)
	if code != ExitUnusable || !strings.Contains(stderr, `cells[0].id: "m1" is not a cell id`) || !strings.Contains(stderr, "cells[0].checks: missing: every cell has a verifier") {
		t.Errorf("suites --suite-dir with a bad suite: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "suites", "--suite-dir", filepath.Join(dir, "M1.sh")); code != ExitUnusable || !strings.Contains(stderr, "is not a directory") {
		t.Errorf("suites --suite-dir FILE: exit %d\n%s", code, stderr)
	}
}
