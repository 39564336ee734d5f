package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/stats"
)

var update = flag.Bool("update", false, "rewrite golden files (and the fixed input run in testdata/run)")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testenv.Golden(t, name, got, *update)
}

const testRun = "testdata/run"

// fixedRun makes the test run: three targets (docker the baseline, local,
// and an emulated lima), all twelve cells, three interleaved rounds, with
// one failed sample, one ineligible one, and one count that differs.
func fixedRun() (*manifests.RunPins, []manifests.Sample) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	pins := &manifests.RunPins{
		FormatVersion: manifests.ResultsFormatVersion, Kind: manifests.RunPinsKind,
		RunID: "run-20261130T100000Z", BundleID: "build-linux-bb5f636a0c1d",
		ImageID: manifests.DigestOf([]byte("image")), RunnerSHA256: manifests.DigestOf([]byte("runner")),
		StandinSHA256: manifests.DigestOf([]byte("standin")),
		Targets: []manifests.TargetPins{
			{Name: "docker", Engine: manifests.EngineDockerd, Kernel: "6.1.0-40-amd64", CPUs: 2, MemoryBytes: 8 << 30},
			{Name: "local", Engine: manifests.EngineStandin, Kernel: "6.1.0-40-amd64", CPUs: 2, MemoryBytes: 8 << 30},
			{Name: "lima", Engine: manifests.EngineStandin, Kernel: "6.1.0-41-amd64", CPUs: 2, MemoryBytes: 4 << 30, Emulated: true},
		},
		StoreProfile: manifests.StoreDisposable, ConstructionWorkers: 1,
		Tools: map[string]string{"docker": "20.10.24", "git": "2.39.5"},
		Cells: cells.Names(), Native: true, Seed: 7, Samples: 3,
		Start: start, End: start.Add(20 * time.Minute),
	}
	factor := map[string]float64{"docker": 1, "local": 0.92, "lima": 3.1}
	overhead := map[string]int64{"docker": 42_000_000, "local": 4_000_000, "lima": 9_000_000}
	var samples []manifests.Sample
	t := start.Add(time.Minute)
	for i, slot := range stats.Interleave([]string{"docker", "local", "lima"}, cells.Names(), 3, pins.Seed) {
		cellNo := 0
		fmt.Sscanf(slot.Cell, "C%d", &cellNo)
		jitter := 1 + 0.03*float64((i*7)%5-2)
		cmd := int64(float64(10_000_000+cellNo*7_000_000) * factor[slot.Target] * jitter)
		native := cmd / 9
		s := manifests.Sample{
			FormatVersion: manifests.ResultsFormatVersion, RunID: pins.RunID, BundleID: pins.BundleID,
			Target: slot.Target, Cell: slot.Cell, Round: slot.Round, Order: i,
			Status: manifests.StatusOK, Verifier: manifests.VerifierPass,
			CommandNs: cmd, ExecWallNs: cmd + overhead[slot.Target], ExecOverheadNs: overhead[slot.Target],
			MountNs: int64(6_000_000 * factor[slot.Target]), UnmountNs: 2_000_000, CommitNs: int64(cellNo) * 3_000_000,
			NativeNs:     &native,
			FUSERequests: map[string]int64{"CREATE": 1000, "LOOKUP": int64(1000 + cellNo), "WRITE": 1000},
			Statements:   int64(4000 + cellNo), StoreBytes: 1 << 20, OverlayBytes: int64(cellNo) * 4096,
			Files: 1000, Bytes: 8893, Load1: 1.5 + float64(i%7)/10, LockWaitNs: int64(i%3) * 1_000_000,
			Start: t, End: t.Add(2 * time.Second),
		}
		switch {
		case slot.Target == "lima" && slot.Cell == "C12" && slot.Round == 1:
			s.Status, s.Reason = manifests.StatusFailed, "verifier failed"
			s.Verifier, s.VerifierDetail = manifests.VerifierFail, `one commit: got "0", want "1"`
		case slot.Target == "local" && slot.Cell == "C05":
			s.FUSERequests["LOOKUP"]++ // the difference the report must flag
		case slot.Target == "lima" && slot.Cell == "C11" && slot.Round == 2:
			s.Status, s.Reason, s.Verifier = manifests.StatusIneligible, "the target's kernel lacks FUSE passthrough", manifests.VerifierNotRun
			s.CommandNs, s.ExecWallNs, s.ExecOverheadNs, s.NativeNs = 0, 0, 0, nil
		}
		samples = append(samples, s)
		t = t.Add(3 * time.Second)
	}
	return pins, samples
}

// writeRun writes the fixed run into dir as a run directory.
func writeRun(t *testing.T, dir string) {
	t.Helper()
	pins, samples := fixedRun()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := pins.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifests.PinsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var lines bytes.Buffer
	for _, s := range samples {
		l, err := s.MarshalLine()
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(l)
	}
	if err := os.WriteFile(filepath.Join(dir, manifests.SamplesFile), lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReportGolden(t *testing.T) {
	if *update {
		writeRun(t, testRun)
	}
	inputs, err := Load([]string{testRun})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(inputs, Options{Resamples: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Baseline != "docker" || strings.Join(r.TargetNames(), ",") != "docker,local,lima" || len(r.Cells) != 12 {
		t.Errorf("baseline %s, targets %v, %d cells", r.Baseline, r.TargetNames(), len(r.Cells))
	}
	// The one planted difference, and the failed sample's result row.
	var diffs []string
	for _, d := range r.Differences {
		diffs = append(diffs, d.Cell+" "+d.Count)
	}
	if got := strings.Join(diffs, "; "); got != "C05 fuseRequests; C05 fuseRequests.LOOKUP; C11 result; C12 result" {
		t.Errorf("differences: %s", got)
	}
	if len(r.Problems) != 2 {
		t.Errorf("problems: %+v", r.Problems)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := Write(&b, r, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		golden(t, "report.golden."+format, b.Bytes())
		switch format {
		case "json":
			var back Report
			if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Baseline != "docker" {
				t.Errorf("the JSON report does not read back: %v", err)
			}
		case "csv":
			recs, err := csv.NewReader(&b).ReadAll()
			if err != nil || len(recs) < 100 {
				t.Errorf("the CSV report: %d records, %v", len(recs), err)
			}
		case "html":
			for _, banned := range []string{"<script", "http://", "https://", "src=", "<link"} {
				if bytes.Contains(bytes.ReplaceAll(b.Bytes(), []byte(`xmlns="http://www.w3.org/2000/svg"`), nil), []byte(banned)) {
					t.Errorf("the HTML page has %q: it must be self-contained", banned)
				}
			}
			if n := bytes.Count(b.Bytes(), []byte("<svg")); n != len(r.Timings) {
				t.Errorf("%d charts for %d timings", n, len(r.Timings))
			}
		}
	}
}

// TestRatiosAndIntervals checks the numbers against the fixed run's
// construction: local runs every command at 0.92 of docker's time.
func TestRatiosAndIntervals(t *testing.T) {
	pins, samples := fixedRun()
	r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 2000})
	if err != nil {
		t.Fatal(err)
	}
	cmd := r.Timings[0]
	if cmd.Metric != "commandNs" {
		t.Fatalf("first timing is %s", cmd.Metric)
	}
	if g := *cmd.GeoMean[1].Value; g < 0.90 || g > 0.94 {
		t.Errorf("local's geometric mean ratio = %v, want about 0.92", g)
	}
	if g := *cmd.GeoMean[0].Value; g != 1 {
		t.Errorf("the baseline's own ratio = %v, want 1", g)
	}
	c01 := cmd.Rows[0].Values[1]
	if c01.N != 3 || c01.CI == nil || c01.Pairs != 3 || !(c01.CI.Low <= *c01.Ratio && *c01.Ratio <= c01.CI.High) {
		t.Errorf("C01 local: %+v", c01)
	}
	// lima's failed C12 sample does not count; its ineligible C11 neither.
	if v := cmd.Rows[11].Values[2]; v.N != 2 {
		t.Errorf("lima C12 counts %d samples, want 2", v.N)
	}
	var over *Timing
	for i := range r.Timings {
		if r.Timings[i].Metric == "execOverheadNs" {
			over = &r.Timings[i]
		}
	}
	if over == nil || *over.MedianOverCells[0].Value != 42_000_000 || *over.MedianOverCells[1].Value != 4_000_000 {
		t.Errorf("per-exec overhead medians: %+v", over)
	}

	other, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Baseline: "local", Resamples: 2000})
	if err != nil || other.Baseline != "local" || *other.Timings[0].GeoMean[0].Value < 1.05 {
		t.Errorf("--baseline local: %v, %+v", err, other.Timings[0].GeoMean)
	}
}

func TestBuildRejects(t *testing.T) {
	pins, samples := fixedRun()
	in := func(mut func([]manifests.Sample)) []Input {
		ss := append([]manifests.Sample(nil), samples...)
		if mut != nil {
			mut(ss)
		}
		return []Input{{Source: "run", Samples: ss}}
	}
	otherBundle := in(func(ss []manifests.Sample) {
		for i := range ss {
			ss[i].BundleID = "build-linux-000000000000"
		}
	})[0]
	otherBundle.Source = "run2"
	for _, tt := range []struct {
		name   string
		inputs []Input
		opt    Options
		want   string
	}{
		{"baseline not in results", in(nil), Options{Baseline: "apple"}, `baseline "apple" is not among the targets in the results (docker, lima, local)`},
		{"unknown cell", in(func(ss []manifests.Sample) { ss[4].Cell = "C13" }), Options{}, `unknown cell "C13"`},
		{"no inputs", nil, Options{}, "no results"},
		{"no samples", []Input{{Source: "empty"}}, Options{}, "empty: no samples"},
		{"different bundles", append(in(nil), otherBundle), Options{}, "runs of different bundles"},
		{"target in two runs", append(in(nil), in(nil)...), Options{}, "target docker is in two runs"},
		{"samples outside their pins", []Input{{Source: "run", Pins: pins, Samples: in(func(ss []manifests.Sample) { ss[0].Target = "apple" })[0].Samples}}, Options{}, `"apple" is not among the run's targets`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.inputs, tt.opt)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build = %v, want an InputError containing %q", err, tt.want)
			}
		})
	}
	if err := Write(&bytes.Buffer{}, &Report{}, "pdf"); !errors.Is(err, ErrFormat) {
		t.Errorf("Write(pdf) = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "run"))
	// A samples file alone, with and without pins beside it.
	if in, err := Load([]string{filepath.Join(dir, "run", manifests.SamplesFile)}); err != nil || in[0].Pins == nil {
		t.Errorf("Load(samples.jsonl) = %v", err)
	}
	lone := filepath.Join(dir, "lone")
	os.Mkdir(lone, 0o755)
	b, _ := os.ReadFile(filepath.Join(dir, "run", manifests.SamplesFile))
	os.WriteFile(filepath.Join(lone, "s.jsonl"), b, 0o644)
	if in, err := Load([]string{filepath.Join(lone, "s.jsonl")}); err != nil || in[0].Pins != nil || len(in[0].Samples) != 108 {
		t.Errorf("Load(a lone samples file) = %v", err)
	}
	os.WriteFile(filepath.Join(lone, "cut.jsonl"), b[:len(b)-10], 0o644)
	for _, tt := range []struct{ path, want string }{
		{lone, "has no samples.jsonl"},
		{filepath.Join(dir, "absent"), "no such file"},
		{filepath.Join(lone, "cut.jsonl"), "line 108: the last line is cut off"},
	} {
		_, err := Load([]string{tt.path})
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%s) = %v, want %q", tt.path, err, tt.want)
		}
	}
	os.Remove(filepath.Join(dir, "run", manifests.PinsFile))
	if _, err := Load([]string{filepath.Join(dir, "run")}); err == nil || !strings.Contains(err.Error(), "has no pins.json") {
		t.Errorf("a run directory without pins: %v", err)
	}
}

// TestKernelDifferencesAreExplained: a FUSE request count that differs
// only between targets on different kernels is explained (the kernel
// chooses the requests); one that differs between targets on the same
// kernel, or a count of files, is not.
func TestKernelDifferencesAreExplained(t *testing.T) {
	pins, samples := fixedRun()
	pins.Targets[2].Kernel = "6.18.44" // lima on its own kernel
	for i := range samples {
		s := &samples[i]
		if s.Target == "local" && s.Cell == "C05" {
			s.FUSERequests["LOOKUP"]-- // undo the fixture's same-kernel difference
		}
		if s.Target == "lima" && s.Cell == "C09" {
			s.FUSERequests["READ"] = 256 // no passthrough there
		}
		if s.Target == "lima" && s.Cell == "C01" {
			s.Files++ // different work
		}
	}
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{Baseline: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	var whys, unexplained []string
	for _, d := range r.Differences {
		if d.Why != "" {
			whys = append(whys, d.Cell+" "+d.Count)
		} else {
			unexplained = append(unexplained, d.Cell+" "+d.Count)
		}
	}
	if strings.Join(whys, ",") != "C09 fuseRequests,C09 fuseRequests.READ" {
		t.Errorf("explained: %q", whys)
	}
	// C11 and C12 differ in result by the fixture's failed and ineligible
	// samples: different work too.
	if strings.Join(unexplained, ",") != "C01 files,C11 result,C12 result" || r.Explained() {
		t.Errorf("unexplained: %q (Explained %v)", unexplained, r.Explained())
	}
	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "- C09 FUSE READ: docker 0, local 0, lima 256 (different kernels: ") {
		t.Errorf("markdown does not explain the READ difference:\n%s", md.String())
	}
}

// TestHousekeepingIsNotWork: FORGET comes when the kernel evicts inodes,
// on its own time; a FORGET count that differs is not different work.
func TestHousekeepingIsNotWork(t *testing.T) {
	pins, samples := fixedRun()
	for i := range samples {
		if samples[i].Target == "local" && samples[i].Cell == "C03" {
			samples[i].FUSERequests["FORGET"] = int64(996 + samples[i].Round)
		}
	}
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{Baseline: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Differences {
		if d.Cell == "C03" {
			t.Errorf("C03 %s flagged as different work: %v", d.Count, d.Values)
		}
	}
}
