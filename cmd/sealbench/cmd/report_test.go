//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportRun is the fixed run the report package's golden tests read.
var reportRun = filepath.Join("..", "..", "..", "runner", "report", "testdata", "run")

func TestReportCLI(t *testing.T) {
	code, stdout, stderr := run(t, "report", reportRun)
	if code != ExitOK || !strings.HasPrefix(stdout, "# sealbench report") || !strings.Contains(stdout, "Baseline: **docker**") {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "warning: 4 count(s) differ") {
		t.Errorf("no warning about the differing counts: %q", stderr)
	}
	want, err := os.ReadFile(filepath.Join(reportRun, "..", "report.golden.md"))
	if err != nil {
		t.Fatal(err)
	}
	if stdout != string(want) {
		t.Error("the command's Markdown differs from the report package's golden file")
	}

	// --json alone: the JSON report on stdout.
	code, stdout, _ = run(t, "report", "--json", "--baseline", "local", filepath.Join(reportRun, "samples.jsonl"))
	var r struct {
		Baseline string
		Targets  []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &r); code != ExitOK || err != nil || r.Baseline != "local" || len(r.Targets) != 3 {
		t.Errorf("report --json: exit %d, %v, %+v", code, err, r)
	}

	// --out, for every format; --json then prints a summary.
	dir := t.TempDir()
	for _, f := range []string{"md", "html", "json", "csv"} {
		out := filepath.Join(dir, "report."+f)
		code, stdout, stderr := run(t, "report", reportRun, "--format", f, "--out", out)
		if code != ExitOK || !strings.HasPrefix(stdout, "wrote "+out) {
			t.Errorf("--format %s --out: exit %d, %s%s", f, code, stdout, stderr)
		}
		if b, err := os.ReadFile(out); err != nil || len(b) == 0 {
			t.Errorf("--out %s: %v", out, err)
		}
	}
	code, stdout, _ = run(t, "report", "--json", reportRun, "--format", "html", "--out", filepath.Join(dir, "r.html"))
	var sum struct {
		Out         string
		Differences int
	}
	if err := json.Unmarshal([]byte(stdout), &sum); code != ExitOK || err != nil || sum.Differences != 4 {
		t.Errorf("--json --out: exit %d, %q", code, stdout)
	}

	// Exit 3: unusable input, each with what is wrong.
	cut := filepath.Join(dir, "cut.jsonl")
	b, _ := os.ReadFile(filepath.Join(reportRun, "samples.jsonl"))
	os.WriteFile(cut, b[:len(b)-5], 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "no results given"},
		{[]string{"report", dir}, "has no samples.jsonl"},
		{[]string{"report", filepath.Join(dir, "absent")}, "no such file"},
		{[]string{"report", cut}, "line 108: the last line is cut off"},
		{[]string{"report", reportRun, "--baseline", "apple"}, `baseline "apple" is not among the targets`},
		{[]string{"report", reportRun, "--format", "pdf"}, `unknown format "pdf"`},
		{[]string{"report", "--json", reportRun, "--format", "csv"}, "--json prints JSON"},
		{[]string{"report", reportRun, reportRun}, "is in two runs"},
	} {
		code, _, stderr := run(t, tt.args...)
		if code != ExitUnusable || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, want %d with %q: %s", tt.args, code, ExitUnusable, tt.want, stderr)
		}
	}
}
