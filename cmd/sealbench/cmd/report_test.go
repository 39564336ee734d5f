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
	if code != ExitOK || !strings.HasPrefix(stdout, "# sealbench report") || !strings.Contains(stdout, "| docker (baseline) |") {
		t.Fatalf("report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// (The fixture's ineligible sample is not supported, not a difference.)
	if !strings.Contains(stderr, "warning: 3 count(s) differ") {
		t.Errorf("no warning about the differing counts: %q", stderr)
	}
	want, err := os.ReadFile(filepath.Join(reportRun, "..", "report.golden.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The command checks the run's signed results (the package's golden
	// file is rendered without a check): the summary says so in one line,
	// the rest is the package's report.
	const signedLine = "- **Signed results:** run-20261130T100000Z: unsigned: no results.sigstore.json: the run was not signed (run --sign-key)\n"
	if !strings.Contains(stdout, signedLine) {
		t.Errorf("the summary does not say the run is unsigned:\n%s", stdout)
	}
	if strings.Replace(stdout, signedLine, "", 1) != string(want) {
		t.Error("the command's Markdown differs from the report package's golden file (beyond the signature's line)")
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
	// --json is --format json: the file is JSON, and stdout says what was
	// written, as JSON.
	jsonOut := filepath.Join(dir, "r.json")
	code, stdout, _ = run(t, "report", "--json", reportRun, "--out", jsonOut)
	var sum struct {
		Out, Format                        string
		Differences, Problems, Unsupported int
	}
	if err := json.Unmarshal([]byte(stdout), &sum); code != ExitOK || err != nil || sum.Format != "json" || sum.Differences != 3 || sum.Problems != 1 || sum.Unsupported != 1 {
		t.Errorf("--json --out: exit %d, %q", code, stdout)
	}
	if b, err := os.ReadFile(jsonOut); err != nil || !json.Valid(b) {
		t.Errorf("--json --out r.json did not write JSON: %v\n%.200s", err, b)
	}
	// With no --format, the --out file's extension says it.
	code, stdout, _ = run(t, "report", reportRun, "--out", filepath.Join(dir, "by-name.html"))
	if b, err := os.ReadFile(filepath.Join(dir, "by-name.html")); code != ExitOK || err != nil || !strings.HasPrefix(string(b), "<!DOCTYPE html>") || !strings.Contains(stdout, "(html;") {
		t.Errorf("--out by-name.html: exit %d, %v, %q", code, err, stdout)
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
		{[]string{"report", "--json", reportRun, "--format", "csv"}, "--json and --format csv say different things"},
		{[]string{"report", reportRun, "--format", "md", "--out", filepath.Join(dir, "r2.json")}, "is a .json file, but the format is md"},
		{[]string{"report", "--json", reportRun, "--out", filepath.Join(dir, "r.html")}, "is a .html file, but the format is json"},
		{[]string{"report", "--compare", reportRun, reportRun, "--format", "benchstat"}, "--format benchstat does not apply to --compare"},
		{[]string{"report", reportRun, reportRun}, "is in two runs"},
		{[]string{"report", "--compare", reportRun}, "--compare takes two runs, got 1"},
		{[]string{"report", reportRun, "--match", "local=lima"}, "--match and --cells need --compare"},
		{[]string{"report", "--compare", reportRun, reportRun, "--baseline", "local"}, "--baseline does not apply to --compare"},
		{[]string{"report", "--compare", reportRun, reportRun, "--match", "local=lima=x"}, `target pair "local=lima=x"`},
		{[]string{"report", "--compare", reportRun, reportRun, "--match", "apple=local"}, `the old run has no target "apple"`},
		{[]string{"report", "--compare", reportRun, reportRun, "--cells", "C01,C13"}, "cell C13 is not in both runs"},
	} {
		code, _, stderr := run(t, tt.args...)
		if code != ExitUnusable || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, want %d with %q: %s", tt.args, code, ExitUnusable, tt.want, stderr)
		}
	}
}

// TestReportCompareCLI: --compare OLD NEW writes the comparison; the same
// run against itself shows no change anywhere.
func TestReportCompareCLI(t *testing.T) {
	code, stdout, stderr := run(t, "report", "--compare", reportRun, reportRun, "--match", "docker=docker,local=local", "--cells", "C01,C06")
	if code != ExitOK || !strings.HasPrefix(stdout, "# sealbench comparison") {
		t.Fatalf("report --compare: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"| C01 | docker | 17.0 [16.0, 18.0] | 17.0 [16.0, 18.0] | +0.0% [", "| C06 | local |", "| geometric mean | local |  |  | +0.0% ["} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the comparison lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "| lima |") || strings.Contains(stdout, "| C02 |") {
		t.Error("the comparison has a target or cell that --match and --cells left out")
	}
	out := filepath.Join(t.TempDir(), "cmp.json")
	code, stdout, _ = run(t, "report", "--json", "--compare", reportRun, reportRun, "--format", "json", "--out", out)
	var sum struct {
		Out   string
		Cells []string
	}
	if err := json.Unmarshal([]byte(stdout), &sum); code != ExitOK || err != nil || sum.Out != out || len(sum.Cells) != 12 {
		t.Errorf("--compare --json --out: exit %d, %q", code, stdout)
	}
}

// report --bounds: each cell's median against the range, printed with its
// interval; exit 1 when one is outside, 0 when all are within; a bound
// that does not parse is refused before anything is read.
func TestReportBoundsCLI(t *testing.T) {
	code, stdout, stderr := run(t, "report", reportRun, "--bounds", "nativeRepeatOverNative=0.9:1.1")
	if code != ExitMismatch || !strings.Contains(stdout, "nativeRepeatOverNative  C06   docker  1.30 [1.30, 1.30]  0.90-1.10  OUTSIDE") ||
		!strings.Contains(stdout, "1 of 36 medians outside their bounds") || !strings.Contains(stderr, "1 of 36 medians outside their bounds") {
		t.Errorf("an A/A outside: exit %d\n%s\n%s", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "report.json")
	code, stdout, stderr = run(t, "report", reportRun, "--out", out, "--bounds", "commandNs=1:1000", "--json")
	var j struct {
		Outside int
		Checks  []struct{ Within bool }
	}
	if err := json.Unmarshal([]byte(stdout), &j); code != ExitOK || err != nil || j.Outside != 0 || len(j.Checks) != 36 {
		t.Errorf("every command time within 1-1000 ms: exit %d, %v, %+v\n%s", code, err, j, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || !json.Valid(b) {
		t.Errorf("--out with --bounds: the report was not written: %v", err)
	}
	for _, bad := range []string{"layerfsOverNative", "speed=1:2", "commandNs=2:1"} {
		if code, _, stderr := run(t, "report", reportRun, "--bounds", bad); code != ExitUnusable || !strings.Contains(stderr, "--bounds") {
			t.Errorf("--bounds %s: exit %d, want %d\n%s", bad, code, ExitUnusable, stderr)
		}
	}
}
