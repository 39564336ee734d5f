package report

import (
	"bytes"
	"encoding/csv"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
)

// TestSummary: the answer first, on the fixed run: what ran, which cells'
// counts differ, what makes the targets hard to compare, and per target
// the headline figures with intervals, the cells split into differences
// shown and not.
func TestSummary(t *testing.T) {
	pins, samples := fixedRun()
	r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 2000})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Summary
	if o.Samples != 108 || o.SamplesOK != 106 || o.Problems != 1 || o.Unsupported != 1 || o.SamplesPerCell != 3 || o.Cells != 12 || strings.Join(o.Bundles, ",") != "build-linux-bb5f636a0c1d" {
		t.Errorf("what ran: %+v", o)
	}
	// C11's one ineligible sample did no work: left out of the counts.
	if o.CountsMatch || strings.Join(o.DifferentWork, ",") != "C05,C12" || len(o.KernelOnly) != 0 {
		t.Errorf("counts: match %v, different work %v, kernel only %v", o.CountsMatch, o.DifferentWork, o.KernelOnly)
	}
	// docker and local share a machine; lima has 4 GiB, another kernel,
	// emulation and /dev/fuse. Every target has 2 CPUs.
	warnings := strings.Join(o.Warnings, "\n")
	for _, want := range []string{"Memory sizes differ (docker 8 GiB, local 8 GiB, lima 4 GiB)", "Kernels differ", "Emulation differs (docker native, local native, lima emulated)", "FUSE transports differ (docker uring, local uring / dev, lima dev)"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("the warnings lack %q:\n%s", want, warnings)
		}
	}
	if strings.Contains(warnings, "CPUs") || strings.Contains(warnings, "Engine transports") {
		t.Errorf("a warning about what does not differ:\n%s", warnings)
	}
	docker, local := o.Headlines[0], o.Headlines[1]
	if !docker.Baseline || docker.CommandVsBaseline != nil || docker.LayerFSOverNative == nil || docker.ExecOverheadNs == nil || *docker.ExecOverheadNs.Value != 42_000_000 {
		t.Errorf("docker's headline: %+v", docker)
	}
	c := local.CommandVsBaseline
	if c == nil || c.CI == nil || !c.CI.Contains(*c.Value) || c.CI.Contains(1) || *c.NoDifference || *c.Value < 0.9 || *c.Value > 0.94 {
		t.Errorf("local's command time vs docker: %+v", c)
	}
	if l := local.LayerFSOverNative; l == nil || l.CI == nil || !l.CI.Contains(*l.Value) || l.Cells != 11 ||
		len(l.LeftOut) != 1 || l.LeftOut[0] != (LeftOut{Cell: "C07", Why: "implausible: LayerFS 0.24x native"}) {
		t.Errorf("local's LayerFS over native: %+v", l)
	}
	// Every cell is in exactly one list, and each list agrees with the
	// cell's own interval.
	cmd := timing(r, "commandNs")
	all := slices.Concat(local.Faster, local.Slower, local.Same, local.Bare)
	slices.Sort(all)
	if len(all) != 12 || len(slices.Compact(all)) != 12 || len(local.Faster) == 0 || len(local.Same) == 0 {
		t.Errorf("local's cells: faster %v, slower %v, same %v, bare %v", local.Faster, local.Slower, local.Same, local.Bare)
	}
	for i, row := range cmd.Rows {
		v := row.Values[1]
		if slices.Contains(local.Same, row.Cell) != v.CI.Contains(1) || slices.Contains(local.Faster, row.Cell) != (v.CI.High < 1) {
			t.Errorf("row %d %s: %+v against faster %v, same %v", i, row.Cell, v.CI, local.Faster, local.Same)
		}
	}
	// The large-file cells (C06-C08) cost what native does on docker.
	if strings.Join(docker.NativeSame, ",") != "C06,C07,C08" {
		t.Errorf("docker's cells no different from native: %v", docker.NativeSame)
	}

	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	text := md.String()
	order := []string{"## Summary", "**Counts:** counts differ in C05, C12",
		"**The protocol's own noise (A/A):** A/A docker within ±", "; outside 0.9-1.1 in C06 1.30x; local within ±", "**Machine:** the run's own machine: ext4 without a journal at /: creating a file there costs more the more inodes were freed nearby",
		"**Machine:** the run's own machine: free page reporting is active (18 GiB reported at the start, 1.2 GiB more during the run)",
		"**Before reading the timings:**", "| docker (baseline) | 6.01x [", " over 11 cells; C06 left out: reference unstable (A/A 1.30x)",
		"| local | 6.05x [", " over 11 cells; C07 left out: implausible (LayerFS 0.24x native)", "## 1. Same work", "## 2. Timings", "## 3. Provenance"}
	at := 0
	for _, s := range order {
		i := strings.Index(text[at:], s)
		if i < 0 {
			t.Fatalf("the Markdown lacks %q after byte %d (summary, counts, timings, in that order)", s, at)
		}
		at += i
	}
	if strings.Contains(text, "Signed results") {
		t.Error("the Markdown speaks of signatures nobody checked")
	}
	var c2 bytes.Buffer
	if err := Write(&c2, r, "csv"); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c2).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, rec := range recs {
		found[strings.Join(rec[:5], ",")] = true
	}
	for _, want := range []string{"summary,,,countsMatch,false", "summary,,,differentWork,C05 C12", "summary,,,samplesOk,106"} {
		if !found[want] {
			t.Errorf("the CSV lacks the row %q", want)
		}
	}
}

// TestSignatures: the report says what the host found about each run's
// signed results, and nothing when nobody looked.
func TestSignatures(t *testing.T) {
	pins, samples := fixedRun()
	key := "sha256:" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		sig  *Signature
		want []string
	}{
		{&Signature{State: SignatureVerified, Key: key}, []string{"**Signed results:** run-20261130T100000Z: signed, verified (key sha256:abababababab…)"}},
		{&Signature{State: SignatureUnsigned}, []string{"**Signed results:** run-20261130T100000Z: unsigned"}},
		{&Signature{State: SignatureUnchecked, Key: key}, []string{"signed, not checked (no key given)"}},
		{&Signature{State: SignatureInvalid, Key: key, Detail: "samples.jsonl was altered"}, []string{"signature INVALID (key sha256:abababababab…): samples.jsonl was altered"}},
	} {
		r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples, Signature: tt.sig}}, Options{Resamples: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"md", "html"} {
			var b bytes.Buffer
			if err := Write(&b, r, format); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if format == "html" {
					w = strings.NewReplacer("**", "", "Signed results:", "Signed results:</strong>").Replace(w)
					w = strings.ReplaceAll(w, "&", "&amp;")
				}
				if !strings.Contains(b.String(), w) {
					t.Errorf("%s, %s: lacks %q", tt.sig.State, format, w)
				}
			}
		}
	}
	// Two runs, one checked: the other is "not checked".
	in := []Input{
		{Source: "a", Samples: samplesOf(samples, "docker"), Signature: &Signature{State: SignatureVerified, Key: key}},
		{Source: "b", Samples: samplesOf(samples, "local")},
	}
	r, err := Build(in, Options{Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.signatureLines(), "; "); !strings.HasSuffix(got, "run-20261130T100000Z: not checked") {
		t.Errorf("signature lines: %q", got)
	}
}

func samplesOf(samples []manifests.Sample, target string) []manifests.Sample {
	var out []manifests.Sample
	for _, s := range samples {
		if s.Target == target {
			out = append(out, s)
		}
	}
	return out
}

// TestCharts: a chart of one target has no ratio to draw; values that
// span orders of magnitude get a log scale, and every bar a whisker
// where it has an interval.
func TestCharts(t *testing.T) {
	pins, samples := fixedRun()
	pins.Targets = pins.Targets[:1]
	r, err := Build([]Input{{Source: "one", Pins: pins, Samples: samplesOf(samples, "docker")}}, Options{Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, r, "html"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "<svg"); n != 6 || strings.Contains(page, "ratio to docker (the line") {
		t.Errorf("one target: %d charts (want 6: five timings and the opcodes), ratio chart %v", n, strings.Contains(page, "ratio to docker (the line"))
	}
	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	// Nothing is relative to a baseline when there is one target.
	if strings.Contains(page, "<small>baseline</small>") || strings.Contains(md.String(), "command time vs") || strings.Contains(md.String(), "(baseline)") ||
		!strings.Contains(md.String(), "every count matched across the samples of every cell") {
		t.Error("a one-target report speaks of a baseline, or of counts across targets")
	}
	if strings.Count(page, `class="ci"`) != 5*12 {
		t.Errorf("%d whiskers, want one per cell in each of five charts", strings.Count(page, `class="ci"`))
	}
	// Every sample is a dot beside its median: three rounds of twelve
	// cells in each of five charts.
	if n := strings.Count(page, `class="sample"`); n != 5*12*3 {
		t.Errorf("%d sample dots, want %d: every sample of every charted value", n, 5*12*3)
	}
	if s := makeScale([]float64{0.5, 3, 900}); !s.log || s.min != 0.1 || s.max != 1000 {
		t.Errorf("values over four orders of magnitude: %+v", s)
	}
	if s := makeScale([]float64{12, 30, 95}); s.log || s.min != 0 || s.max != 100 {
		t.Errorf("values within one order of magnitude: %+v", s)
	}
	if got := makeScale([]float64{0.5, 3, 900}).ticks(); len(got) != 5 || got[0] != 0.1 || got[4] != 1000 {
		t.Errorf("log ticks: %v", got)
	}
}

// TestHeadlineLeavesOutWhatFailsItsChecks: the headline LayerFS over
// native is the geometric mean of the medians of exactly the cells it
// names; a cell whose A/A median is outside 0.9-1.1, or whose LayerFS
// over native is below 0.67, is left out and named with why; more than a
// quarter of the cells left out makes the headline inconclusive, with no
// number.
func TestHeadlineLeavesOutWhatFailsItsChecks(t *testing.T) {
	build := func(t *testing.T, unstable ...string) *Report {
		t.Helper()
		pins, samples := fixedRun()
		for i := range samples {
			s := &samples[i]
			if s.Target == "local" && slices.Contains(unstable, s.Cell) && s.NativeNs != nil {
				rep := int64(float64(*s.NativeNs) * 1.3)
				s.NativeRepeatNs = &rep
			}
		}
		r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 500})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// geoOf is the geometric mean of target i's medians in lon over every
	// cell but those left out.
	geoOf := func(r *Report, i int, leftOut ...string) float64 {
		lon := timing(r, "layerfsOverNative")
		var logs float64
		n := 0
		for _, row := range lon.Rows {
			if v := row.Values[i]; v.MedianNs != nil && !slices.Contains(leftOut, row.Cell) {
				logs += math.Log(*v.MedianNs)
				n++
			}
		}
		return math.Exp(logs / float64(n))
	}

	r := build(t)
	docker, local := r.Summary.Headlines[0], r.Summary.Headlines[1]
	if d := docker.LayerFSOverNative; d == nil || d.Value == nil || d.Cells != 11 || !near(*d.Value, geoOf(r, 0, "C06")) ||
		len(d.LeftOut) != 1 || d.LeftOut[0] != (LeftOut{Cell: "C06", Why: "reference unstable: A/A 1.30x"}) {
		t.Errorf("docker's headline: %+v, want the geomean over every cell but C06 (%v)", d, geoOf(r, 0, "C06"))
	}
	if l := local.LayerFSOverNative; l == nil || l.Value == nil || !near(*l.Value, geoOf(r, 1, "C07")) {
		t.Errorf("local's headline: %+v, want the geomean over every cell but C07 (%v)", l, geoOf(r, 1, "C07"))
	}
	if a := docker.AA; a == nil || a.Cells != 12 || len(a.Outside) != 1 || a.Outside[0].Cell != "C06" || a.WithinPct <= 0 || a.WithinPct > 10 {
		t.Errorf("docker's A/A: %+v", a)
	}
	if a := local.AA; a == nil || len(a.Outside) != 0 || !strings.HasPrefix(a.Text(), "within ±") {
		t.Errorf("local's A/A: %+v (%s)", a, a.Text())
	}

	// Two more of local's cells unstable: three of twelve left out, a
	// quarter, and the rest still stands for the run.
	r = build(t, "C01", "C02")
	l := r.Summary.Headlines[1].LayerFSOverNative
	if l == nil || l.Inconclusive || l.Value == nil || l.Cells != 9 || !near(*l.Value, geoOf(r, 1, "C01", "C02", "C07")) {
		t.Errorf("a quarter left out: %+v, want the geomean over the other 9 cells", l)
	}
	// One more: more than a quarter, and no number.
	r = build(t, "C01", "C02", "C03")
	l = r.Summary.Headlines[1].LayerFSOverNative
	if l == nil || !l.Inconclusive || l.Value != nil || len(l.LeftOut) != 4 {
		t.Fatalf("four of twelve left out: %+v, want inconclusive, no value", l)
	}
	want := "inconclusive: 4 of 12 cells left out (C01, C02, C03 left out: reference unstable (A/A 1.30x, A/A 1.30x, A/A 1.30x); C07 left out: implausible (LayerFS 0.24x native))"
	if got := headlineValue(l, times, ratio); got != want {
		t.Errorf("the headline says %q, want %q", got, want)
	}
	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| local | "+want+" |") {
		t.Errorf("the Markdown's headline row lacks %q", want)
	}
}

// TestReportNamesThePrecisionRulesSamples: the run line says which cells
// the precision rule gave more rounds, and how many samples it added.
func TestReportNamesThePrecisionRulesSamples(t *testing.T) {
	pins, all := fixedRun()
	pins.Samples = 2
	var samples []manifests.Sample
	for _, s := range all {
		switch {
		case s.Round < 2:
			samples = append(samples, s)
		case s.Cell == "C01":
			s.Precision = true
			samples = append(samples, s)
		}
	}
	r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Extension{{Cell: "C01", Samples: 3}}; !slices.Equal(r.Summary.Extended, want) {
		t.Errorf("extended: %+v, want %+v", r.Summary.Extended, want)
	}
	var md bytes.Buffer
	if err := Write(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	if want := "Values are medians of 2 samples (more in C01, which the precision rule extended)"; !strings.Contains(md.String(), want) {
		t.Errorf("the Markdown does not say %q", want)
	}
	if want := "the precision rule added samples where the A/A interval was wider than 0.2: C01 +3"; !strings.Contains(md.String(), want) {
		t.Errorf("the Markdown does not say %q:\n%.1500s", want, md.String())
	}
}

// TestReportShowsTimeToAUsableSandbox: each target's time to a usable
// Sandbox (create request to first exec) is a timing per cell and, its
// median over cells, a headline figure in every format, said to be a
// claim's on a warm pool for a target whose pins say its Sandboxes were.
func TestReportShowsTimeToAUsableSandbox(t *testing.T) {
	pins, samples := fixedRun()
	for i := range pins.Targets {
		if pins.Targets[i].Name == "lima" {
			pins.Targets[i].WarmPool = 2
		}
	}
	readyMs := map[string]int64{"docker": 310, "local": 45, "lima": 900}
	for i := range samples {
		samples[i].ReadyNs = readyMs[samples[i].Target]*1e6 + int64(samples[i].Round)*1e6
	}
	r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range r.Summary.Headlines {
		want := float64(readyMs[h.Target]+1) * 1e6 // the median round's
		if h.ReadyNs == nil || h.ReadyNs.Value == nil || *h.ReadyNs.Value != want || h.ReadyNs.Cells != 12 {
			t.Errorf("%s: time to a usable Sandbox %+v, want %v over 12 cells", h.Target, h.ReadyNs, want)
		}
	}
	if timing(r, "readyNs") == nil {
		t.Fatal("no readyNs timing")
	}
	for format, want := range map[string]string{
		"md":       "usable Sandbox in (ms, median over cells; cold unless from a warm pool)",
		"md ":      "| 901 [900, 902], claimed from a warm pool of 2 |",
		"console":  "a usable Sandbox in 46.0",
		"console ": "a usable Sandbox in 901 [900, 902] ms, claimed from a warm pool of 2",
		"html":     "a usable Sandbox, median over cells, cold",
		"html ":    "a usable Sandbox, median over cells, claimed from a warm pool of 2",
		"csv":      "headline,,local,readyNs,46000000",
	} {
		format = strings.TrimSpace(format)
		var b bytes.Buffer
		write := func() error { return Write(&b, r, format) }
		if format == "console" {
			write = func() error { return WriteConsole(&b, r) }
		}
		if err := write(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s does not say %q:\n%.2500s", format, want, b.String())
		}
	}
}

// TestReportShowsLaunchToExit: every sample's exit is a timing of its own;
// the whole task from launch to exit is one only for the cells whose
// samples carry it, with no row for the others, and its medians are the
// samples' own.
func TestReportShowsLaunchToExit(t *testing.T) {
	pins, samples := fixedRun()
	exitMs := map[string]int64{"docker": 60, "local": 5, "lima": 90}
	for i := range samples {
		s := &samples[i]
		s.ExitNs = exitMs[s.Target]*1e6 + int64(s.Round)*1e6
		if s.Cell == "C12" {
			s.LaunchToExitNs = 1000*1e6 + exitMs[s.Target]*1e6 + int64(s.Round)*1e6
		}
	}
	r, err := Build([]Input{{Source: "fixed", Pins: pins, Samples: samples}}, Options{Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	if tm := timing(r, "exitNs"); tm == nil || len(tm.Rows) != 12 {
		t.Fatalf("exitNs timing: %+v", tm)
	}
	tm := timing(r, "launchToExitNs")
	if tm == nil || len(tm.Rows) != 1 || tm.Rows[0].Cell != "C12" {
		t.Fatalf("launchToExitNs timing: %+v; want one row, C12's", tm)
	}
	for i, v := range tm.Rows[0].Values {
		want := float64(1000+exitMs[r.Targets[i].Name]+1) * 1e6 // the median round's
		if v.MedianNs == nil || *v.MedianNs != want {
			t.Errorf("%s: launch to exit %v, want %v", r.Targets[i].Name, v.MedianNs, want)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, r, "md"); err != nil {
		t.Fatal(err)
	}
	if md := b.String(); !strings.Contains(md, "### The whole task, launch to exit") || strings.Contains(md, "| C01 create 1,000 files | — | — |") {
		t.Errorf("report.md's launch-to-exit table:\n%s", md)
	}
}
