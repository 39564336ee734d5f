package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/stats"
)

const testRun = "testdata/run"

// fixedRun makes the test run: three targets (docker the baseline, local,
// and an emulated lima), all twelve cells, three interleaved rounds under
// protocol 2, with one failed sample, one ineligible one, and one count
// that differs. LayerFS over native is about 9 where bodies create
// files, and about 1 (no difference shown) in the large-file cells
// C06-C08, except local's C07, whose native reference ran four times slow
// (implausible), one of its windows undrained. The A/A repeat is within a
// few percent of the native reference, except docker's C06, whose repeat
// took 1.3 times as long (unstable). docker and local ran over io_uring,
// local once over /dev/fuse; lima over /dev/fuse. The machine's balloon
// reports free pages.
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
		Machines: []manifests.Machine{{PageReporting: manifests.PageReportingActive, ReportedKiBStart: ptr(int64(18 << 20)), ReportedKiBEnd: ptr(int64(18<<20 + 1258291)),
			Balloon: true, TransparentHugepages: "madvise", UnjournaledExt4: []string{"/"}}},
	}
	factor := map[string]float64{"docker": 1, "local": 0.92, "lima": 3.1}
	overhead := map[string]int64{"docker": 42_000_000, "local": 4_000_000, "lima": 9_000_000}
	var samples []manifests.Sample
	t := start.Add(time.Minute)
	transport := map[string]string{"docker": "uring", "local": "uring", "lima": "dev"}
	for i, slot := range stats.Interleave([]string{"docker", "local", "lima"}, cells.Names(), pins.Samples, pins.Seed) {
		cellNo := 0
		fmt.Sscanf(slot.Cell, "C%d", &cellNo)
		jitter := 1 + 0.03*float64((i*7)%5-2)
		cmd := int64(float64(10_000_000+cellNo*7_000_000) * factor[slot.Target] * jitter)
		over := 9.0
		if cellNo >= 6 && cellNo <= 8 { // 64 MiB through FUSE passthrough
			over = 1.01
		}
		if slot.Target == "local" && slot.Cell == "C07" {
			over = 0.23 // the native reference ran slow
		}
		native := int64(float64(cmd) / over * (1 + 0.04*float64((i*3)%5-2)))
		aa := 1 + 0.02*float64((i*5)%5-2)
		if slot.Target == "docker" && slot.Cell == "C06" {
			aa = 1.3 // the reference did not hold still
		}
		repeat := int64(float64(native) * aa)
		s := manifests.Sample{
			FormatVersion: manifests.ResultsFormatVersion, RunID: pins.RunID, BundleID: pins.BundleID,
			Target: slot.Target, Cell: slot.Cell, Round: slot.Round, Order: i,
			Status: manifests.StatusOK, Verifier: manifests.VerifierPass,
			CommandNs: cmd, ExecWallNs: cmd + overhead[slot.Target], ExecOverheadNs: overhead[slot.Target],
			MountNs: int64(6_000_000 * factor[slot.Target]), UnmountNs: 2_000_000, CommitNs: int64(cellNo) * 3_000_000,
			NativeNs: &native, NativeRepeatNs: &repeat, Protocol: manifests.ProtocolVersion,
			FUSERequests: map[string]int64{"CREATE": 1000, "LOOKUP": int64(1000 + cellNo), "WRITE": 1000},
			Statements:   int64(4000 + cellNo), StoreBytes: 1 << 20, OverlayBytes: int64(cellNo) * 4096,
			Files: 1000, Bytes: 8893, Load1: 1.5 + float64(i%7)/10, LockWaitNs: int64(i%3) * 1_000_000,
			Start: t, End: t.Add(2 * time.Second),
			FUSETransport: transport[slot.Target],
		}
		s.First, s.Phases = protocol(slot.Cell, i)
		switch {
		case slot.Target == "lima" && slot.Cell == "C12" && slot.Round == 1:
			s.Status, s.Reason = manifests.StatusFailed, "verifier failed"
			s.Verifier, s.VerifierDetail = manifests.VerifierFail, `one commit: got "0", want "1"`
		case slot.Target == "local" && slot.Cell == "C05":
			s.FUSERequests["LOOKUP"]++ // the difference the report must flag
		case slot.Target == "lima" && slot.Cell == "C11" && slot.Round == 2:
			s.Status, s.Reason, s.Verifier = manifests.StatusIneligible, "the target's kernel lacks FUSE passthrough", manifests.VerifierNotRun
			s.CommandNs, s.ExecWallNs, s.ExecOverheadNs, s.NativeNs, s.NativeRepeatNs = 0, 0, 0, nil, nil
			s.FUSETransport, s.First, s.Phases = "", "", nil
		case slot.Target == "local" && slot.Cell == "C07" && slot.Round == 1:
			for j := range s.Phases {
				if b := s.Phases[j].Barrier; b != nil && s.Phases[j].Side == manifests.SideNative {
					b.DirtyPages, b.WritebackPages, b.WaitNs, b.Drained = 41_000, 9_500, 5_000_000_000, false
				}
			}
		case slot.Target == "local" && slot.Cell == "C02" && slot.Round == 2:
			s.FUSETransport = "dev"
		}
		samples = append(samples, s)
		t = t.Add(3 * time.Second)
	}
	return pins, samples
}

// protocol is a sample's cache protocol as the runner records it under
// protocol 2: each side's warm-up in an earlier directory, discarded,
// then each side's timed run in a fresh one after a barrier and a
// prefault; the three sides rotate.
func protocol(cell string, order int) (string, []manifests.Phase) {
	sides := []string{manifests.SideLayerFS, manifests.SideNative, manifests.SideNativeRepeat}
	k := order % 3
	sides = append(sides[k:], sides[:k]...)
	var phases, windows []manifests.Phase
	for _, side := range sides {
		dir := fmt.Sprintf("/var/lib/sealbench/scratch/%s-%d/%s", cell, order, side)
		phases = append(phases, manifests.Phase{Side: side, Kind: manifests.PhaseWarmUp, Dir: dir + "/warm", Discarded: true})
		windows = append(windows, manifests.Phase{Side: side, Kind: manifests.PhaseTimed, Dir: dir + "/timed",
			Barrier: &manifests.Barrier{DirtyPages: int64(12 + order%40), WritebackPages: 0, WaitNs: int64(30_000_000 + order*10_000), Drained: true,
				PrefaultBytes: 32 << 20, PrefaultNs: 9_000_000}})
	}
	return sides[0], append(phases, windows...)
}

func ptr[T any](v T) *T { return &v }

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

// fixtureReport is the report of the fixed run in testdata, with the
// defaults, and the inputs it was built from.
func fixtureReport(t *testing.T) (*Report, []Input) {
	t.Helper()
	inputs, err := Load([]string{testRun})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r, inputs
}

func TestReportGolden(t *testing.T) {
	if testenv.Update() {
		writeRun(t, testRun)
	}
	// The defaults, as `sealbench report` uses them: its test compares
	// the command's output with this golden file.
	r, inputs := fixtureReport(t)
	if r.Baseline != "docker" || strings.Join(r.TargetNames(), ",") != "docker,local,lima" || len(r.Cells) != 12 {
		t.Errorf("baseline %s, targets %v, %d cells", r.Baseline, r.TargetNames(), len(r.Cells))
	}
	// The one planted difference, and the failed sample's result row (the
	// ineligible sample is not supported, neither a difference nor a failure).
	var diffs []string
	for _, d := range r.Differences {
		diffs = append(diffs, d.Cell+" "+d.Count)
	}
	if got := strings.Join(diffs, "; "); got != "C05 fuseRequests; C05 fuseRequests.LOOKUP; C12 result" {
		t.Errorf("differences: %s", got)
	}
	if len(r.Problems) != 1 || len(r.Unsupported) != 1 {
		t.Errorf("problems: %+v, unsupported: %+v", r.Problems, r.Unsupported)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := Write(&b, r, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		testenv.Golden(t, "report.golden."+format, b.Bytes())
		again, err := Build(inputs, Options{})
		var b2 bytes.Buffer
		if err != nil || Write(&b2, again, format) != nil || !bytes.Equal(b.Bytes(), b2.Bytes()) {
			t.Errorf("the %s report of the same input is not the same bytes twice", format)
		}
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
			// Five timings charted by value (the A/A among them), the ratio to the baseline
			// (three targets), and the FUSE requests by opcode.
			if n := bytes.Count(b.Bytes(), []byte("<svg")); n != 7 {
				t.Errorf("%d charts, want 7", n)
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

	// Every median of two samples or more carries its interval, which
	// holds it; the interval is the bootstrap's, with the report's seed.
	for _, tm := range r.Timings {
		for _, row := range tm.Rows {
			for i, v := range row.Values {
				switch {
				case v.N >= 2 && (v.MedianCI == nil || !v.MedianCI.Contains(*v.MedianNs)):
					t.Errorf("%s %s %s: median %v, interval %+v", tm.Metric, row.Cell, r.Targets[i].Name, *v.MedianNs, v.MedianCI)
				case v.N < 2 && v.MedianCI != nil:
					t.Errorf("%s %s %s: an interval from %d samples", tm.Metric, row.Cell, r.Targets[i].Name, v.N)
				}
			}
		}
	}
	xs := sampleValues(samples, "docker", "C01", func(s *manifests.Sample) float64 { return float64(s.CommandNs) })
	if want, _ := stats.BootstrapMedian(xs, Level, 2000, 7); *cmd.Rows[0].Values[0].MedianCI != want {
		t.Errorf("docker C01's interval %+v, want the bootstrap's %+v", *cmd.Rows[0].Values[0].MedianCI, want)
	}

	// LayerFS over native is the median of each sample's own ratio, with
	// its interval paired within each sample; between targets, the ratio
	// of those medians, paired by round.
	lon := timing(r, "layerfsOverNative")
	for _, cell := range []string{"C01", "C07"} {
		row := lon.Rows[map[string]int{"C01": 0, "C07": 6}[cell]]
		var want [2]float64
		for i, target := range []string{"docker", "local"} {
			cmds := sampleValues(samples, target, cell, func(s *manifests.Sample) float64 { return float64(s.CommandNs) })
			natives := sampleValues(samples, target, cell, func(s *manifests.Sample) float64 { return float64(*s.NativeNs) })
			want[i] = stats.MedianOfRatios(cmds, natives)
			iv, _ := stats.BootstrapPairedRatio(cmds, natives, Level, 2000, 7)
			if v := row.Values[i]; !near(*v.MedianNs, want[i]) || *v.MedianCI != iv {
				t.Errorf("%s %s: LayerFS over native %v %+v, want %v %+v", target, cell, *v.MedianNs, *v.MedianCI, want[i], iv)
			}
		}
		v := row.Values[1]
		if !near(*v.Ratio, want[1]/want[0]) || v.Pairs != 3 || !v.CI.Contains(*v.Ratio) {
			t.Errorf("local/docker %s: %v %+v, want %v", cell, *v.Ratio, v.CI, want[1]/want[0])
		}
	}

	other, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Baseline: "local", Resamples: 2000})
	if err != nil || other.Baseline != "local" || *other.Timings[0].GeoMean[0].Value < 1.05 {
		t.Errorf("--baseline local: %v, %+v", err, other.Timings[0].GeoMean)
	}
}

// TestSanityChecks: what the report states about its own numbers, on the
// fixed run: a ratio whose interval includes 1.0 shows no difference; a
// LayerFS over native whose median is below 0.67 is a suspect reference
// (implausible), and so is every ratio that divides it; an A/A median
// outside 0.9-1.1 is unstable; mixed FUSE transports and an undrained
// timed window are noted; every rendering carries all of it.
func TestSanityChecks(t *testing.T) {
	pins, samples := fixedRun()
	r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 2000})
	if err != nil {
		t.Fatal(err)
	}
	lon := timing(r, "layerfsOverNative")
	docker, local := 0, 1
	c01, c06, c07 := lon.Rows[0], lon.Rows[5], lon.Rows[6]
	switch {
	case isTrue(c01.Values[docker].MedianNoDifference) || c01.Values[docker].Suspect:
		t.Errorf("docker C01, 9x native, shows no difference or is suspect: %+v", c01.Values[docker])
	case !isTrue(c06.Values[docker].MedianNoDifference) || c06.Values[docker].Suspect:
		t.Errorf("docker C06, about native, does not show 'no difference': %+v", c06.Values[docker])
	case !c07.Values[local].Suspect || !(*c07.Values[local].MedianNs < ImplausibleBelow) || !c07.Values[local].RatioSuspect:
		t.Errorf("local C07, whose native reference ran slow, is not suspect: %+v", c07.Values[local])
	case c07.Values[docker].Suspect || c07.Values[docker].RatioSuspect:
		t.Errorf("docker C07 is suspect: %+v", c07.Values[docker])
	case !isTrue(c01.Values[local].NoDifference) || c01.Values[local].RatioSuspect:
		t.Errorf("local/docker C01 of LayerFS over native: %+v", c01.Values[local])
	case lon.GeoMean[local].Suspect != 1 || lon.GeoMean[2].Suspect != 0:
		t.Errorf("geometric means: %+v", lon.GeoMean)
	}
	for _, tm := range r.Timings {
		for _, row := range tm.Rows {
			for i, v := range row.Values {
				if (v.NoDifference != nil) != (v.CI != nil) || v.CI != nil && *v.NoDifference != v.CI.Contains(1) {
					t.Errorf("%s %s %s: noDifference %v for %+v", tm.Metric, row.Cell, r.Targets[i].Name, v.NoDifference, v.CI)
				}
				if tm.Unit != UnitTimes && (v.Suspect || v.RatioSuspect || v.MedianNoDifference != nil) {
					t.Errorf("%s %s %s: a duration marked as a ratio: %+v", tm.Metric, row.Cell, r.Targets[i].Name, v)
				}
			}
		}
	}
	var transports []string
	for _, tg := range r.Targets {
		transports = append(transports, tg.Name+" "+tg.FUSETransportText())
	}
	if got := strings.Join(transports, ", "); got != "docker uring, local uring / dev, lima dev" {
		t.Errorf("FUSE transports: %s", got)
	}
	if tg := r.Targets[local]; tg.TimedWindows != 108 || tg.UndrainedWindows != 1 || r.Targets[docker].UndrainedWindows != 0 {
		t.Errorf("timed windows: %+v", r.Targets)
	}

	want := map[string][]string{
		"md": {
			"| local | run-20261130T100000Z | standin | 6.1.0-40-amd64 | 2 | 8 GiB | false | uring / dev | 36 |",
			"| C07 write 64 MiB, copy it | 0.94x [0.94, 1.01] ~ | 0.24x [0.21, 0.25], suspect reference | 0.26x [0.21, 0.27], suspect reference |",
			"- local: suspect reference in C07 0.24x [0.21, 0.25] (a native run first in 2 of 3 samples; 1 timed window undrained).",
			"Checked in every cell: LayerFS over native below 0.67 is physically implausible",
			"| C06 write 64 MiB | 1.30x [1.30, 1.30], unstable | 0.96x [0.96, 0.96] |  | 0.96x [0.96, 0.96] |  |",
			"- docker: unstable in C06 1.30x [1.30, 1.30]",
			"The targets did not all use the same FUSE transport (docker uring, local uring / dev, lima dev)",
			"local's samples were served by both FUSE transports (35 samples over uring, 1 sample over dev)",
			"local: 1 of 108 timed windows started before the kernel's dirty pages had drained",
		},
		"html": {"<td>uring / dev</td>", "0.24x [0.21, 0.25], suspect reference", "Checked in every cell: LayerFS over native below 0.67", `class="bar faint"`, `class="bar suspect"`},
		"json": {`"fuseTransports": [`, `"suspect": true`, `"ratioSuspect": true`, `"noDifference": true`, `"noDifference": false`, `"medianNoDifference": true`, `"medianCi": {`, `"undrainedWindows": 1`},
		// local C07: value suspect, ratio suspect, no difference shown in neither.
		"csv": {"target,,local,fuseTransport,uring / dev,36", "target,,local,undrainedWindows,1,108",
			"timing,C07,local,layerfsOverNative,0.2396,3,0.2562,0.2109,0.2673,,docker,0.2130,0.2500,false,true,false,true\n"},
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := Write(&b, r, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range want[format] {
			if !strings.Contains(b.String(), w) {
				t.Errorf("the %s report lacks %q", format, w)
			}
		}
	}
}

// TestOneSampleGolden: one sample per cell, as `--samples 1` gives: no
// interval anywhere, a note that says so, and a LayerFS over native below
// 0.8 marked suspect all the same.
func TestOneSampleGolden(t *testing.T) {
	pins, samples := fixedRun()
	pins.Samples = 1
	pins.Targets = pins.Targets[:2] // docker and local
	pins.Cells = []string{"C01", "C07"}
	var one []manifests.Sample
	for _, s := range samples {
		if s.Round == 0 && s.Target != "lima" && (s.Cell == "C01" || s.Cell == "C07") {
			s.FUSETransport = "dev"
			one = append(one, s)
		}
	}
	r, err := Build([]Input{{Source: "one", Pins: pins, Samples: one}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Multi() {
		t.Error("one sample per cell, but the report says several")
	}
	for _, tm := range r.Timings {
		for _, row := range tm.Rows {
			for _, v := range row.Values {
				if v.MedianCI != nil || v.CI != nil || v.NoDifference != nil || v.MedianNoDifference != nil {
					t.Errorf("%s %s: an interval from one sample: %+v", tm.Metric, row.Cell, v)
				}
			}
		}
	}
	var b bytes.Buffer
	if err := Write(&b, r, "md"); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, w := range []string{
		"a single sample has no interval",
		"Run with --samples 5 or more.",
		"| C07 write 64 MiB, copy it | 0.94x | 0.24x, suspect reference | 0.26x, suspect reference |",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("the Markdown lacks %q", w)
		}
	}
	if strings.Contains(md, "The targets did not all use the same FUSE transport") || strings.Contains(md, " [") {
		t.Error("the Markdown notes a transport difference, or prints an interval")
	}
	testenv.Golden(t, "report.golden.one.md", b.Bytes())
}

func timing(r *Report, metric string) *Timing {
	for i := range r.Timings {
		if r.Timings[i].Metric == metric {
			return &r.Timings[i]
		}
	}
	panic("no timing " + metric)
}

// sampleValues returns get of target's ok samples of cell, by round.
func sampleValues(samples []manifests.Sample, target, cell string, get func(*manifests.Sample) float64) []float64 {
	var byRound []manifests.Sample
	for _, s := range samples {
		if s.Target == target && s.Cell == cell && s.Status == manifests.StatusOK {
			byRound = append(byRound, s)
		}
	}
	sort.Slice(byRound, func(i, j int) bool { return byRound[i].Round < byRound[j].Round })
	var out []float64
	for i := range byRound {
		out = append(out, get(&byRound[i]))
	}
	return out
}

func isTrue(b *bool) bool { return b != nil && *b }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Abs(b) }

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
	} else if in[0].SamplesSHA256 != manifests.DigestOf(b) || !in[0].PinsSHA256.IsZero() {
		t.Errorf("Load(a lone samples file) digests = %v, %v; want the samples' %v and none", in[0].SamplesSHA256, in[0].PinsSHA256, manifests.DigestOf(b))
	}
	pins, _ := os.ReadFile(filepath.Join(dir, "run", manifests.PinsFile))
	if in, err := Load([]string{filepath.Join(dir, "run")}); err != nil || in[0].SamplesSHA256 != manifests.DigestOf(b) || in[0].PinsSHA256 != manifests.DigestOf(pins) {
		t.Errorf("Load(a run) = %v, digests %v %v; want those of the bytes read", err, in[0].SamplesSHA256, in[0].PinsSHA256)
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
	// C12 differs in result by the fixture's failed sample: different
	// work too. C11's ineligible sample did no work: it is left out.
	if strings.Join(unexplained, ",") != "C01 files,C12 result" || r.Explained() {
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

// TestFlushProbesAreExplained: Linux's FUSE sends FLUSH until LayerFS's
// first ENOSYS answer arrives, one per thread closing a file before then:
// 1 or 2 FLUSH requests between one target's samples, or between two
// targets on one kernel, and the totals that differ by as many, are
// explained; a count beyond a few threads' worth, or anything else that
// differs with it, is not.
func TestFlushProbesAreExplained(t *testing.T) {
	build := func(flush func(s *manifests.Sample) int64) *Report {
		t.Helper()
		pins, samples := fixedRun()
		for i := range samples {
			s := &samples[i]
			if s.Target == "local" && s.Cell == "C05" {
				s.FUSERequests["LOOKUP"]-- // undo the fixture's same-kernel difference
			}
			if s.Cell == "C03" {
				s.FUSERequests["FLUSH"] = flush(s)
			}
		}
		r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{Baseline: "docker"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	whys := func(r *Report) (explained, not []string) {
		for _, d := range r.Differences {
			if d.Cell != "C03" {
				continue
			}
			if d.Why == flushWhy {
				explained = append(explained, d.Count)
			} else {
				not = append(not, d.Count)
			}
		}
		return explained, not
	}
	odd := func(s *manifests.Sample) bool { return s.Target == "local" && s.Round == 1 }
	r := build(func(s *manifests.Sample) int64 {
		if odd(s) {
			return 2
		}
		return 1
	})
	if explained, not := whys(r); strings.Join(explained, ",") != "fuseRequests,fuseRequests.FLUSH" || len(not) > 0 {
		t.Errorf("FLUSH 1 or 2: explained %q, not %q", explained, not)
	}
	// C12 differs by the fixture's failed sample: different work.
	if v := r.Summary.countsVerdict(); !strings.Contains(v, "; in C03 only FLUSH requests differ: Linux's FUSE sends FLUSH") {
		t.Errorf("the verdict: %s", v)
	}
	r = build(func(s *manifests.Sample) int64 {
		if odd(s) {
			return 9
		}
		return 1
	})
	if explained, not := whys(r); len(explained) > 0 || strings.Join(not, ",") != "fuseRequests,fuseRequests.FLUSH" || r.Explained() {
		t.Errorf("FLUSH 1 or 9: explained %q, not %q", explained, not)
	}
}

// TestGVisorFUSEAndUnsupportedCells: counts that differ between a target
// under gVisor and one on Linux's FUSE are explained as a different FUSE
// implementation (the pins say whose FUSE), and a cell whose every sample
// was ineligible there shows "not supported", listed with its reason as
// not supported by this backend, neither a difference nor a failure.
func TestGVisorFUSEAndUnsupportedCells(t *testing.T) {
	pins, samples := fixedRun()
	g := &pins.Targets[2] // lima, here under gVisor on the host's kernel
	g.Kernel, g.FUSE, g.Runtime, g.RuntimeVersion, g.RuntimePlatform = pins.Targets[1].Kernel, manifests.FUSEGVisor, "runsc", "v0.0.0-20260905035102-160fafc42237", "systrap"
	const why = "gVisor's FUSE cannot mmap(2) a file (ENOSYS)"
	for i := range samples {
		s := &samples[i]
		if s.Target == "local" && s.Cell == "C05" {
			s.FUSERequests["LOOKUP"]-- // undo the fixture's same-kernel difference
		}
		if s.Target != "lima" {
			continue
		}
		switch s.Cell {
		case "C09":
			s.FUSERequests["READ"] = 256
		case "C11":
			s.Status, s.Reason, s.Verifier = manifests.StatusOK, "", manifests.VerifierPass
			s.CommandNs, s.ExecWallNs, s.ExecOverheadNs = 40_000_000, 43_000_000, 3_000_000
		case "C12":
			s.Status, s.Reason, s.Verifier, s.VerifierDetail = manifests.StatusIneligible, why, manifests.VerifierNotRun, ""
			s.FUSERequests = map[string]int64{}
		}
	}
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{Baseline: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Explained() || len(r.Differences) == 0 {
		t.Errorf("differences %+v: want some, every one explained", r.Differences)
	}
	for _, d := range r.Differences {
		if d.Cell != "C09" || !strings.HasPrefix(d.Why, "different FUSE implementation: ") {
			t.Errorf("difference %+v: want only C09's READs, explained by the FUSE implementation", d)
		}
	}
	if len(r.Problems) != 0 || len(r.Unsupported) != 3 || r.Summary.Unsupported != 3 || r.Summary.Between != "different FUSE implementations" {
		t.Errorf("problems %v, unsupported %v, summary %+v: want no failure, lima's three C12 not supported", r.Problems, r.Unsupported, r.Summary)
	}
	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- C09 FUSE READ: docker 0, local 0, lima 256 (different FUSE implementation: docker 6.1.0-40-amd64, local 6.1.0-40-amd64, lima gVisor's FUSE (runsc v0.0.0-20260905035102-160fafc42237, systrap)",
		"- lima C12 round 0: not supported by this backend: " + why + "\n",
		"| C12 git init, 100 files, add, commit | pass (lima: not supported) | 3,012 | 4,012 |",
		"(3 not supported by this backend)",
		"between targets with different FUSE implementations",
		", under gVisor (runsc v0.0.0-20260905035102-160fafc42237, systrap)",
		"FUSE implementations differ (docker linux, local linux, lima gVisor's (runsc v0.0.0-20260905035102-160fafc42237, systrap)): ",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md.String())
		}
	}
	var html bytes.Buffer
	if err := Write(&html, r, "html"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "lima C12 round 2: not supported by this backend: gVisor&#39;s FUSE") {
		t.Errorf("the HTML does not list lima's C12 as not supported")
	}
}

// TestGVisorDirectoryRecords: Store bytes a byte or two apart between
// Linux's filesystems and gVisor's, agreeing within each, are the
// directories' records (gVisor's directories are 60 bytes, Linux's 4096),
// explained; more than storeRecordSlack apart, or apart between two Linux
// targets, they stay different work.
func TestGVisorDirectoryRecords(t *testing.T) {
	for _, c := range []struct {
		name         string
		gvisor       bool
		lima, docker int64
		explained    bool
	}{
		{"a byte apart under gVisor", true, -1, 0, true},
		{"beyond the slack under gVisor", true, -(storeRecordSlack + 1), 0, false},
		{"a byte apart between two Linux targets", false, -1, 0, false},
		{"gVisor's agree, two Linux targets disagree", true, -1, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pins, samples := fixedRun()
			if c.gvisor {
				g := &pins.Targets[2]
				g.FUSE, g.Runtime, g.RuntimeVersion, g.RuntimePlatform = manifests.FUSEGVisor, "runsc", "v0.0.0-20260905035102-160fafc42237", "systrap"
			}
			for i := range samples {
				if s := &samples[i]; s.Cell == "C03" {
					s.StoreBytes += map[string]int64{"lima": c.lima, "docker": c.docker}[s.Target]
				}
			}
			r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{Baseline: "docker"})
			if err != nil {
				t.Fatal(err)
			}
			var d *Difference
			for i := range r.Differences {
				if r.Differences[i].Cell == "C03" && r.Differences[i].Count == "storeBytes" {
					d = &r.Differences[i]
				}
			}
			switch {
			case d == nil:
				t.Fatalf("no C03 Store bytes difference among %+v", r.Differences)
			case c.explained != strings.HasPrefix(d.Why, "different filesystems under the Sandboxes: "):
				t.Errorf("C03's Store bytes %v explained %q: want explained %v", d.Values, d.Why, c.explained)
			case c.explained && (!r.Summary.StoreExplained || slices.Contains(r.Summary.DifferentWork, "C03") ||
				!strings.Contains(r.Summary.countsVerdict(), "FUSE requests and Store bytes")):
				t.Errorf("summary %+v (%q): want C03 the same work, its Store bytes explained", r.Summary, r.Summary.countsVerdict())
			case !c.explained && !slices.Contains(r.Summary.DifferentWork, "C03"):
				t.Errorf("summary %+v: want C03 different work", r.Summary)
			}
		})
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

// TestFUSEURingPin: the targets table says what the run pinned of the
// host's enable_uring beside the transports the samples used, and a note
// says when the parameter was on but a sample fell back to /dev/fuse.
func TestFUSEURingPin(t *testing.T) {
	pins, samples := fixedRun()
	for i := range pins.Targets {
		switch pins.Targets[i].Name {
		case "local", "docker":
			pins.Targets[i].FUSEURing = manifests.FUSEURingOn
		default:
			pins.Targets[i].FUSEURing = manifests.FUSEURingNA
		}
	}
	dev := 0
	for _, s := range samples {
		if s.Target == "local" && s.FUSETransport == "dev" {
			dev++
		}
	}
	if dev == 0 {
		t.Fatal("the fixture has no local sample over /dev/fuse: the note has nothing to say")
	}
	md := markdown(t, pins, samples)
	for _, want := range []string{
		"| uring / dev (enable_uring on) |",
		"(enable_uring n/a) |",
		"local: enable_uring was on, yet " + plural(dev, "sample") + " used /dev/fuse",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "docker: enable_uring was on, yet") {
		t.Error("a note about docker, whose samples all used io_uring")
	}
}

// realRun is a real run's results (`make run` on this project's CI
// machine: local and docker, twelve cells, five samples each, --native):
// cells that send only some opcodes, where the fixed run sends the same
// three everywhere.
const realRun = "testdata/realrun"

func TestRealRunRendersEveryFormat(t *testing.T) {
	inputs, err := Load([]string{realRun})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var b bytes.Buffer
		if err := Write(&b, r, f); err != nil || b.Len() == 0 {
			t.Errorf("Write(%s) = %v, %d bytes", f, err, b.Len())
		}
	}
	// Each cell's stacked bar adds up to its FUSE requests, the opcodes a
	// cell never sent counting zero.
	c := opcodeChart(r, r.countMatrix(r.Opcodes, nil))
	if len(c.groups) != len(r.Cells) {
		t.Fatalf("the opcode chart has %d cells, want %d", len(c.groups), len(r.Cells))
	}
	for _, g := range c.groups {
		var want string
		for _, row := range r.Counts {
			if row.Cell == g.label && row.Count == "fuseRequests" {
				want = grouped(row.Values[0])
			}
		}
		if len(g.bars) != 1 || g.bars[0].total != want {
			t.Errorf("%s: opcode bars %+v, want one adding up to %s FUSE requests", g.label, g.bars, want)
		}
	}
}

// TestEngineRestartsAreNoted: execs the Engine could not start, and the
// runner started again, are noted per target with the cells they were in;
// a target without any gets no note.
func TestEngineRestartsAreNoted(t *testing.T) {
	pins, samples := fixedRun()
	for i := range samples {
		if s := &samples[i]; s.Target == "docker" && (s.Cell == "C04" || s.Cell == "C09") && s.Round == 1 {
			s.EngineRestarts = map[string]int{"C04": 2, "C09": 1}[s.Cell]
		}
	}
	md := markdown(t, pins, samples)
	if want := "docker: its Engine could not start 3 execs (in C04, C09); the runner started each again"; !strings.Contains(md.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, md.String())
	}
	if strings.Contains(md.String(), "local: its Engine could not start") {
		t.Error("a note about local, whose Engine started every exec")
	}
}

// markdown is the Markdown report of one run's pins and samples.
func markdown(t *testing.T, pins *manifests.RunPins, samples []manifests.Sample) *bytes.Buffer {
	t.Helper()
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	return &md
}

// TestKernelTextSaysTheCluster: a Kubernetes target's kernel cell names
// the node, the cluster's version, the container runtime and the
// RuntimeClass with its handler; the default class when none was named.
func TestKernelTextSaysTheCluster(t *testing.T) {
	ti := TargetInfo{TargetPins: manifests.TargetPins{Kernel: "6.18.44", Cluster: "v1.34.12", Node: "n1", ContainerRuntime: "containerd://1.6.20", Runtime: "gvisor", RuntimeHandler: "runsc"}}
	if got, want := ti.KernelText(), "6.18.44, node n1 of Kubernetes v1.34.12 (containerd://1.6.20, RuntimeClass gvisor (handler runsc))"; got != want {
		t.Errorf("KernelText %q, want %q", got, want)
	}
	ti.Runtime, ti.RuntimeHandler = "", ""
	if got, want := ti.KernelText(), "6.18.44, node n1 of Kubernetes v1.34.12 (containerd://1.6.20, the default RuntimeClass)"; got != want {
		t.Errorf("KernelText %q, want %q", got, want)
	}
	if got := (TargetInfo{TargetPins: manifests.TargetPins{Kernel: "6.1"}}).KernelText(); got != "6.1" {
		t.Errorf("a target that is no cluster: %q", got)
	}
}

// TestSuiteCellsAreNamed: a run's cells of a suite of the user's own
// (defined only in its pins) are named by their titles; without the
// definition the report refuses the cell it cannot name.
func TestSuiteCellsAreNamed(t *testing.T) {
	pins, samples := fixedRun()
	for i := range samples {
		if samples[i].Cell == "C12" {
			samples[i].Cell, samples[i].Suite = "M1", "mine"
		}
	}
	pins.Cells = append(slices.DeleteFunc(slices.Clone(pins.Cells), func(c string) bool { return c == "C12" }), "M1")
	pins.Suites = []string{manifests.DefaultSuite, "mine"}
	pins.SuiteDefs = []manifests.Suite{{Kind: manifests.SuiteKind, Name: "mine", Title: "mine", Cells: []manifests.SuiteCell{{
		ID: "M1", Title: "my own cell", Body: "M1.sh", Verifies: "x", Checks: []manifests.SuiteCheck{{Name: "x", Script: "echo x", Want: "x"}},
	}}}}
	md := markdown(t, pins, samples).String()
	if !strings.Contains(md, "| M1 my own cell |") || !strings.Contains(md, "| C11 overwrite a 64 MiB base file |") {
		t.Errorf("the report does not name M1 by its title:\n%s", md)
	}
	// Each suite has its section: its cells, their titles and what their
	// verifiers check; and the tables head each suite's rows.
	for _, want := range []string{"## Suites\n\n### cells: the twelve filesystem cells\n", "### mine: mine\n\n| cell | what it does | what its verifier checks |\n| --- | --- | --- |\n| M1 | my own cell | x |\n",
		"| **cells**: the twelve filesystem cells |", "| **mine**: mine |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| C12 |") {
		t.Error("the suites' section lists C12, which the run did not have")
	}
	pins.SuiteDefs = nil
	if _, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{}); err == nil || !strings.Contains(err.Error(), `unknown cell "M1"`) {
		t.Errorf("a cell no suite defines: %v", err)
	}
}

// TestClustersAreShown: a cell whose samples fall into two separated
// groups shows each group's median and count, and the note states the
// rule; the other cells keep their medians and intervals.
func TestClustersAreShown(t *testing.T) {
	pins, samples := fixedRun()
	next := len(samples)
	for _, s := range slices.Clone(samples) {
		if s.Target == "local" && s.Cell == "C01" {
			s.Round += 3
			s.Order = next
			next++
			s.CommandNs *= 3 // a second mode, three times slower
			s.ExecWallNs = s.CommandNs + s.ExecOverheadNs
			samples = append(samples, s)
		}
	}
	pins.Samples = 6
	md := markdown(t, pins, samples).String()
	shown := 0
	for _, line := range strings.Split(md, "\n") {
		if !strings.Contains(line, "(clusters)") {
			continue
		}
		shown++
		if !strings.HasPrefix(line, "| C01 create 1,000 files |") || !regexp.MustCompile(`\| [0-9.]+x? ×3 · [0-9.]+x? ×3 \(clusters\) \|`).MatchString(line) {
			t.Errorf("clusters shown where they should not be, or not as two of three: %s", line)
		}
	}
	if shown == 0 {
		t.Errorf("C01 on local does not show its two clusters:\n%s", md)
	}
	if !strings.Contains(md, "each cluster is shown by its median and count") {
		t.Errorf("the report does not state the clusters' rule:\n%s", md)
	}
}

// TestSuitesHaveTheirOwnGeomeans: in a run of two suites, every summary
// over cells is also given over each suite's cells alone, equal to the
// geometric mean of that suite's rows, and the summary, the timing
// tables, the console and the page show them; a run of one suite has
// none.
func TestSuitesHaveTheirOwnGeomeans(t *testing.T) {
	pins, samples := fixedRun()
	mine := map[string]bool{"C11": true, "C12": true}
	for i := range samples {
		if mine[samples[i].Cell] {
			samples[i].Cell, samples[i].Suite = "M"+samples[i].Cell[1:], "mine"
		}
	}
	pins.Cells = append(slices.DeleteFunc(slices.Clone(pins.Cells), func(c string) bool { return mine[c] }), "M11", "M12")
	pins.Suites = []string{manifests.DefaultSuite, "mine"}
	check := []manifests.SuiteCheck{{Name: "x", Script: "echo x", Want: "x"}}
	pins.SuiteDefs = []manifests.Suite{{Kind: manifests.SuiteKind, Name: "mine", Title: "mine", Cells: []manifests.SuiteCell{
		{ID: "M11", Title: "my first cell", Body: "M11.sh", Verifies: "x", Checks: check},
		{ID: "M12", Title: "my second cell", Body: "M12.sh", Verifies: "x", Checks: check}}}}
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	cmd := timing(r, "commandNs")
	if cmd == nil || len(cmd.Suites) != 2 || cmd.Suites[0].Suite != manifests.DefaultSuite || cmd.Suites[1].Suite != "mine" {
		t.Fatalf("commandNs's suites: %+v", cmd)
	}
	lima := slices.Index(r.TargetNames(), "lima")
	var ratios []float64
	for _, row := range cmd.Rows {
		if strings.HasPrefix(row.Cell, "M") && row.Values[lima].Ratio != nil {
			ratios = append(ratios, *row.Values[lima].Ratio)
		}
	}
	got := cmd.Suites[1].GeoMean[lima]
	if len(ratios) != 2 || got.Value == nil || got.Cells != 2 || math.Abs(*got.Value-stats.GeoMean(ratios)) > 1e-12 {
		t.Errorf("lima's geometric mean over mine's cells: %+v, want %v over 2 cells", got, stats.GeoMean(ratios))
	}
	if all := cmd.GeoMean[lima]; all.Cells != 12 || *all.Value == *got.Value {
		t.Errorf("lima's geometric mean over all cells %+v: want it over 12 cells, not mine's", all)
	}
	var h Headline
	for _, x := range r.Summary.Headlines {
		if x.Target == "lima" {
			h = x
		}
	}
	if len(h.Suites) != 2 || h.Suites[1].Suite != "mine" || h.Suites[1].CommandVsBaseline == nil || *h.Suites[1].CommandVsBaseline.Value != *got.Value ||
		h.Suites[1].LayerFSOverNative == nil {
		t.Errorf("lima's headline per suite: %+v", h.Suites)
	}
	for format, want := range map[string]string{
		"md":      "| lima | mine | ",
		"md ":     "| geometric mean of ratios, mine |",
		"console": "    mine: LayerFS over native ",
		"html":    "LayerFS over native, geomean over mine&#39;s cells",
	} {
		var b bytes.Buffer
		write := func() error { return Write(&b, r, strings.TrimSpace(format)) }
		if format == "console" {
			write = func() error { return WriteConsole(&b, r) }
		}
		if err := write(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s does not say %q", format, want)
		}
	}
	onePins, oneSamples := fixedRun()
	one, err := Build([]Input{{Source: "fixed", Pins: onePins, Samples: oneSamples}}, Options{Resamples: 50})
	if err != nil {
		t.Fatal(err)
	}
	if tm := timing(one, "commandNs"); len(tm.Suites) != 0 || len(one.Summary.Headlines[0].Suites) != 0 {
		t.Errorf("a run of one suite has per-suite summaries: %+v", tm.Suites)
	}
}
