package report

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/stats"
)

// Write renders r in format: "md", "html", "json" or "csv".
func Write(w io.Writer, r *Report, format string) error {
	bw := bufio.NewWriter(w)
	var err error
	switch format {
	case "md", "markdown":
		err = writeMarkdown(bw, r)
	case "html":
		err = writeHTML(bw, r)
	case "json":
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(r)
	case "csv":
		err = writeCSV(bw, r)
	default:
		return fmt.Errorf("%w %q (want one of %s)", ErrFormat, format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return fmt.Errorf("writing the %s report: %w", format, err)
	}
	return bw.Flush()
}

// ms formats nanoseconds as milliseconds with three significant digits or
// more.
func ms(ns float64) string {
	m := ns / 1e6
	a := m
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 100:
		return strconv.FormatFloat(m, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(m, 'f', 1, 64)
	default:
		return strconv.FormatFloat(m, 'f', 2, 64)
	}
}

func ratio(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// times writes a ratio as a ratio: "1.04x".
func times(f float64) string { return ratio(f) + "x" }

// The marks a value can carry, after its interval.
const (
	markTilde        = "~" // an interval that includes no change
	markNoDifference = "no difference shown"
	markSuspect      = "suspect reference"
)

// intervalText is " [low, high]", each bound written by f; "" without an
// interval.
func intervalText(iv *stats.Interval, f func(float64) string) string {
	if iv == nil {
		return ""
	}
	return " [" + f(iv.Low) + ", " + f(iv.High) + "]"
}

// marks writes " ~" where an interval includes 1.0 (no difference shown,
// as benchstat marks it) and ", " and the mark where the value failed a
// check ("suspect reference", "unstable").
func marks(noDifference *bool, mark string) string {
	s := ""
	if noDifference != nil && *noDifference {
		s += " " + markTilde
	}
	if mark != "" {
		s += ", " + mark
	}
	return s
}

// markIf is mark where failed, else "".
func markIf(failed bool, mark string) string {
	if failed {
		return mark
	}
	return ""
}

// RatioText is a value's ratio to the baseline, with its interval and
// marks: "1.04x [0.97, 1.12] ~"; "" when there is no ratio.
func RatioText(v TimingValue) string {
	if v.Ratio == nil {
		return ""
	}
	return times(*v.Ratio) + intervalText(v.CI, ratio) + marks(v.NoDifference, markIf(v.RatioSuspect, markSuspect))
}

// Format writes one of tm's values: milliseconds, or a ratio ("9.00x").
func (tm Timing) Format(v float64) string {
	if tm.Unit == UnitTimes {
		return times(v)
	}
	return ms(v)
}

// bound writes an interval's bound: as Format, without the "x".
func (tm Timing) bound(v float64) string {
	if tm.Unit == UnitTimes {
		return ratio(v)
	}
	return ms(v)
}

// UnitText says what tm's values are, for a heading.
func (tm Timing) UnitText() string {
	if tm.Unit == UnitTimes {
		return "times native"
	}
	return "ms"
}

// MedianText writes a value's median with its interval and marks
// ("275.0 [262.1, 290.4]", "0.23x [0.20, 0.26], suspect reference",
// "1.01x [0.97, 1.06] ~"); for samples in separated clusters each
// cluster's median and count ("10.2 ×4 · 31.0 ×2 (clusters)"); or a dash.
func (tm Timing) MedianText(v TimingValue) string {
	if v.MedianNs == nil {
		return "—"
	}
	if len(v.Clusters) > 1 {
		var parts []string
		for _, c := range v.Clusters {
			parts = append(parts, fmt.Sprintf("%s ×%d", tm.Format(c.Median), c.N))
		}
		return strings.Join(parts, " · ") + " (clusters)"
	}
	text := tm.Format(*v.MedianNs) + intervalText(v.MedianCI, tm.bound) + marks(v.MedianNoDifference, markIf(v.Suspect, cmp.Or(tm.Mark, markSuspect)))
	if tm.n > 0 && v.N != tm.n {
		text += fmt.Sprintf(" (n=%d)", v.N) // fewer samples than the table's others: one failed, say
	}
	return text
}

// SummaryText writes a median over cells, or a dash.
func (tm Timing) SummaryText(s Summary) string { return summaryText(s, tm.Format) }

// GeoText writes a geometric mean of ratios, or a dash.
func GeoText(s Summary) string { return summaryText(s, times) }

// summaryText writes s by f, saying how many of its cells are suspect.
func summaryText(s Summary, f func(float64) string) string {
	if s.Value == nil && !s.Inconclusive {
		return "—"
	}
	return headlineValue(&s, f, func(v float64) string { return strings.TrimSuffix(f(v), "x") })
}

// headline says what the timings' values are.
func (r *Report) headline() string {
	if !r.Multi() {
		return "One sample per cell and target: values stand bare, without intervals (see the notes)."
	}
	n := r.samplesPerValue()
	level := strconv.FormatFloat(r.Level*100, 'f', -1, 64) + "%"
	claim := fmt.Sprintf("its bootstrap %s interval", level)
	if n < FullCoverageN {
		claim = fmt.Sprintf("its bootstrap percentile interval at a nominal %s (from %d samples a percentile interval covers less than %s: read it as the spread the samples show, not a guarantee)", level, n, level)
	}
	of := plural(n, "sample")
	if ext := r.Summary.Extended; len(ext) > 0 {
		var names []string
		for _, e := range ext {
			names = append(names, e.Cell)
		}
		of += " (more in " + strings.Join(names, ", ") + ", which the precision rule extended)"
	}
	return fmt.Sprintf("Values are medians of %s, each with %s in brackets (seed %d); %s marks a ratio whose interval includes 1.0: %s.",
		of, claim, r.Seed, markTilde, markNoDifference)
}

// FullCoverageN is the fewest samples from which the report calls a
// bootstrap percentile interval of a median a 95% interval: with fewer,
// the percentile interval covers less than its nominal level (benchstat
// gives none below 6), and the legend says so.
const FullCoverageN = 10

// samplesPerValue is how many samples most values are medians of: the
// command time's most common n.
func (r *Report) samplesPerValue() int {
	count := map[int]int{}
	best := 0
	for _, tm := range r.Timings {
		if tm.Metric != metrics[0].name {
			continue
		}
		for _, row := range tm.Rows {
			for _, v := range row.Values {
				if v.N > 0 {
					count[v.N]++
					if count[v.N] > count[best] || count[v.N] == count[best] && v.N > best {
						best = v.N
					}
				}
			}
		}
	}
	return best
}

// grouped writes an integer count with thousands separators; other values
// as they are.
func grouped(v string) string {
	if v == "" {
		return "—"
	}
	parts := strings.Split(v, " / ")
	for i, p := range parts {
		if n, err := strconv.ParseInt(p, 10, 64); err == nil && n >= 1000 {
			s := strconv.FormatInt(n, 10)
			var b strings.Builder
			for j, c := range s {
				if j > 0 && (len(s)-j)%3 == 0 {
					b.WriteByte(',')
				}
				b.WriteRune(c)
			}
			parts[i] = b.String()
		}
	}
	return strings.Join(parts, " / ")
}

// gib says b in GiB with at most one decimal: 23.5 GiB, 2 GiB.
func gib(b int64) string {
	return strconv.FormatFloat(math.Round(float64(b)/(1<<30)*10)/10, 'f', -1, 64) + " GiB"
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

func short(d string) string {
	if alg, hx, ok := strings.Cut(d, ":"); ok && len(hx) > 12 {
		return alg + ":" + hx[:12] + "…"
	}
	if d == "" {
		return "—"
	}
	return d
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// mdInline escapes text from the results for a line of Markdown: no line
// break, HTML, emphasis, code, link or heading of its own.
func mdInline(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "\\", `\\`, "`", "\\`", "*", `\*`, "_", `\_`,
		"[", `\[`, "]", `\]`, "#", `\#`, "|", `\|`, "!", `\!`).Replace(s)
}

func writeMarkdown(w *bufio.Writer, r *Report) error {
	names := r.TargetNames()
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	row := func(cells ...string) {
		for i, c := range cells {
			if c != "---" {
				cells[i] = mdEscape(c)
			}
		}
		p("| %s |\n", strings.Join(cells, " | "))
	}
	sep := func(n int) { row(strings.Split(strings.Repeat("---,", n-1)+"---", ",")...) }
	o := r.Summary

	p("# sealbench report\n\n")
	p("## Summary\n\n")
	p("- **Ran:** %s\n", mdInline(o.ranText()))
	p("- **Counts:** %s\n", mdInline(o.countsVerdict()))
	if aa := o.aaText(); aa != "" {
		p("- **The protocol's own noise (A/A):** %s\n", mdInline(aa))
	}
	for _, m := range r.machineLines() {
		p("- **Machine:** %s\n", mdInline(m))
	}
	if lines := r.signatureLines(); lines != nil {
		p("- **Signed results:** %s\n", mdInline(strings.Join(lines, "; ")))
	}
	if len(o.Warnings) > 0 {
		p("- **Before reading the timings:**\n")
		for _, wn := range o.Warnings {
			p("  - %s\n", mdInline(wn))
		}
	}
	p("\n")
	// With one target there is no baseline to be relative to.
	multi := len(names) > 1
	head := []string{"target", "LayerFS over native (geomean)", "command time vs " + r.Baseline + " (geomean)", "per-exec overhead (ms, median over cells)", "usable Sandbox in (ms, median over cells; cold unless from a warm pool)", "differences shown and not"}
	// Runs before the time to a usable Sandbox was recorded have none.
	ready := slices.ContainsFunc(o.Headlines, func(h Headline) bool { return h.ReadyNs != nil })
	if !ready {
		head = slices.Delete(head, 4, 5)
	}
	if !multi {
		head = slices.Delete(head, 2, 3)
	}
	row(head...)
	sep(len(head))
	for _, h := range o.Headlines {
		name := h.Target
		if h.Baseline && multi {
			name += " (baseline)"
		}
		cells := []string{name, headlineValue(h.LayerFSOverNative, times, ratio), headlineValue(h.CommandVsBaseline, times, ratio),
			headlineValue(h.ExecOverheadNs, ms, ms) + h.transportText(), headlineValue(h.ReadyNs, ms, ms) + h.warmText(), dash(joinNonEmpty("; ", h.nativeText(), h.shownText(r.Baseline)))}
		if !ready {
			cells = slices.Delete(cells, 4, 5)
		}
		if !multi {
			cells = slices.Delete(cells, 2, 3)
		}
		row(cells...)
	}
	if slices.ContainsFunc(o.Headlines, func(h Headline) bool { return len(h.Suites) > 0 }) {
		p("\nPer suite, each geometric mean over that suite's cells alone:\n\n")
		head := []string{"target", "suite", "LayerFS over native (geomean)", "command time vs " + r.Baseline + " (geomean)"}
		if !multi {
			head = head[:3]
		}
		row(head...)
		sep(len(head))
		for _, h := range o.Headlines {
			for _, sh := range h.Suites {
				cells := []string{h.Target, sh.Suite, headlineValue(sh.LayerFSOverNative, times, ratio), headlineValue(sh.CommandVsBaseline, times, ratio)}
				row(cells[:len(head)]...)
			}
		}
	}
	p("\n%s\n", r.headline())

	if r.OwnSections() {
		p("\n## Suites\n")
		for _, su := range r.Suites {
			p("\n### %s: %s\n\n", mdInline(su.Name), mdInline(su.Title))
			row("cell", "what it does", "what its verifier checks")
			sep(3)
			for _, c := range r.Cells {
				if c.Suite == su.Name {
					row(c.Name, c.Title, dash(c.Verifies))
				}
			}
		}
	}
	// suiteRow heads the rows of each suite in a table of more than one.
	suiteRow := func(cell string, n int) {
		if su := r.suiteStartingAt(cell); su != nil {
			row(append([]string{"**" + su.Name + "**: " + su.Title}, make([]string, n-1)...)...)
		}
	}

	p("\n## 1. Same work: exact counts\n\n")
	if len(r.Differences) == 0 {
		p("Every count is equal across all targets in every cell, so the timings below compare the same work.\n\n")
	} else if r.Explained() {
		p("**%d difference(s)** between targets, marked † and listed below, each in FUSE request counts between targets with %s: the files, bytes and results are the same work; their FUSE sent the daemon different requests for it", len(r.Differences), r.Summary.Between)
		if r.Summary.StoreExplained {
			p(" (or, in Store bytes, their filesystems reported other directory sizes for the Store to record)")
		}
		p(".\n\n")
	} else {
		p("**%d difference(s)** between targets (or between one target's samples), listed below: ✗ marks different work, whose cells' timings do not compare the same work; † a FUSE count that differs between kernels. Where the targets agree, a value is shown once.\n\n", len(r.Differences))
	}
	writeMatrix := func(m matrix) {
		row(append([]string{"cell"}, m.Columns...)...)
		sep(len(m.Columns) + 1)
		for _, mr := range m.Rows {
			suiteRow(mr.Cell, len(m.Columns)+1)
			cells := []string{mr.Label}
			for _, v := range mr.Values {
				cells = append(cells, v.Marked())
			}
			row(cells...)
		}
	}
	writeMatrix(r.countMatrix(r.Counts, countKeys()))
	if len(r.Differences) > 0 {
		p("\nDifferences:\n\n")
		for _, d := range r.Differences {
			p("- %s %s: %s", d.Cell, CountTitle(d.Count), differenceValues(d, names))
			if d.Why != "" {
				p(" (%s)", d.Why)
			}
			p("\n")
		}
	}
	if len(r.Opcodes) > 0 {
		p("\n<details><summary>FUSE requests by opcode</summary>\n\n")
		writeMatrix(r.countMatrix(r.Opcodes, nil))
		p("\n</details>\n")
	}
	if len(r.Problems) > 0 {
		p("\nFailed samples (kept, never retried):\n\n")
		for _, pr := range r.Problems {
			p("- %s %s round %d: %s: %s", pr.Target, pr.Cell, pr.Round, pr.Status, mdEscape(pr.Reason))
			if pr.Detail != "" {
				p(" (%s)", mdEscape(pr.Detail))
			}
			p("\n")
		}
	}
	if len(r.Unsupported) > 0 {
		p("\nNot supported by this backend (the target cannot run the cell's LayerFS side; not failures):\n\n")
		for _, pr := range r.Unsupported {
			p("- %s %s round %d: not supported by this backend: %s\n", pr.Target, pr.Cell, pr.Round, mdEscape(pr.Reason))
		}
	}

	p("\n## 2. Timings\n")
	for _, tm := range r.Timings {
		p("\n### %s (%s; ratio to %s)\n\n", tm.Title, tm.UnitText(), r.Baseline)
		head := []string{"cell"}
		for _, n := range names {
			head = append(head, n)
			if n != r.Baseline {
				head = append(head, "ratio")
			}
		}
		row(head...)
		sep(len(head))
		for _, tr := range tm.Rows {
			suiteRow(tr.Cell, len(head))
			cells := []string{r.CellLabel(tr.Cell)}
			for i, n := range names {
				cells = append(cells, tm.MedianText(tr.Values[i]))
				if n != r.Baseline {
					cells = append(cells, RatioText(tr.Values[i]))
				}
			}
			row(cells...)
		}
		for _, sr := range tm.summaryRows(r) {
			row(sr...)
		}
		if len(tm.Notes) > 0 {
			p("\n")
			for _, n := range tm.Notes {
				p("- %s\n", mdEscape(n))
			}
		}
	}

	p("\n## 3. Provenance\n\n")
	row("run", "bundle", "Sandbox image", "runner", "stand-in", "Store", "workers", "samples", "seed", "start", "end", "lock wait max (ms)", "load 1m")
	sep(13)
	for _, run := range r.Runs {
		row(run.RunID, run.BundleID, short(run.ImageID), short(run.RunnerSHA256), short(run.StandinSHA256), dash(run.StoreProfile),
			dashInt(run.ConstructionWorkers), dashInt(run.SamplesPerCell), strconv.FormatUint(run.Seed, 10), when(run.Start), when(run.End),
			ms(float64(run.LockWaitMaxNs)), fmt.Sprintf("%.2f–%.2f", run.Load1Min, run.Load1Max))
	}
	p("\n")
	row("target", "run", "engine", "kernel", "CPUs", "memory", "emulated", "FUSE transport", "samples")
	sep(9)
	for _, t := range r.Targets {
		row(t.Name, t.RunID, dash(t.Engine), t.KernelText(), dashInt(t.CPUs), t.MemoryText(), strconv.FormatBool(t.Emulated), t.FUSETransportText(), strconv.Itoa(t.Samples))
	}
	p("\nHosts, each with the pins its targets share:\n\n")
	row("host", "targets", "kernel", "CPUs", "memory", "runner ran on", "Engine transport")
	sep(7)
	for _, h := range r.Hosts {
		row(h.HostText(), strings.Join(h.Targets, ", "), dash(h.Kernel), dashInt(h.CPUs), h.MemoryText(), h.RunnerText(), dash(h.Transport))
	}
	if ms := r.machines(); len(ms) > 0 {
		p("\nMachines the runners ran on (what moves timings without being the platform's):\n\n")
		row("machine", "free page reporting", "reported at start", "reported during the run", "balloon", "transparent hugepages", "swap", "CPU governor", "ext4 without a journal")
		sep(9)
		for _, m := range ms {
			row(MachineName(m.Host), m.PageReporting, kibText(m.ReportedKiBStart), reportedDuring(m), strconv.FormatBool(m.Balloon),
				dash(m.TransparentHugepages), swapText(m.SwapBytes), dash(m.CPUFreqGovernor), dash(strings.Join(m.UnjournaledExt4, ", ")))
		}
	}
	for _, run := range r.Runs {
		if len(run.Tools) > 0 {
			p("\nTools (%s): %s\n", mdInline(run.RunID), mdInline(toolList(run.Tools)))
		}
	}
	if len(r.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	return nil
}

// suiteStartingAt is the suite whose first cell in the report is cell,
// when the report holds more than one suite; nil otherwise.
func (r *Report) suiteStartingAt(cell string) *SuiteInfo {
	if len(r.Suites) < 2 {
		return nil
	}
	for i := range r.Suites {
		if r.Suites[i].Cells[0] == cell {
			return &r.Suites[i]
		}
	}
	return nil
}

// joinNonEmpty joins the parts that are not empty.
func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// gVisorText names the gVisor a target's Sandboxes ran under: runsc,
// with its version and platform where the target knows them (a cluster's
// RuntimeClass says neither).
func (t TargetInfo) gVisorText() string {
	if v := joinNonEmpty(", ", t.RuntimeVersion, t.RuntimePlatform); v != "" {
		return "runsc " + v
	}
	return "runsc"
}

// MemoryText is the target's memory in GiB, or a dash.
// KernelText is the target's kernel; for one under gVisor, that the
// Sandboxes ran on gVisor's Sentry (its version and platform) above it;
// for a Kubernetes cluster, the node, the cluster's version, the node's
// container runtime and the RuntimeClass.
func (t TargetInfo) KernelText() string {
	text := dash(t.Kernel)
	if t.FUSE == manifests.FUSEGVisor {
		text += ", under gVisor (" + t.gVisorText() + ")"
	}
	if t.Cluster != "" {
		rc := "the default RuntimeClass"
		if t.Runtime != "" {
			rc = "RuntimeClass " + t.Runtime
		}
		if t.RuntimeHandler != "" {
			rc += " (handler " + t.RuntimeHandler + ")"
		}
		text += ", node " + t.Node + " of Kubernetes " + t.Cluster + " (" + t.ContainerRuntime + ", " + rc + ")"
	}
	return text
}

func (t TargetInfo) MemoryText() string {
	if t.MemoryBytes > 0 {
		return gib(t.MemoryBytes)
	}
	return "—"
}

// summaryRows are a timing table's last rows: the geometric mean of the
// ratios to the baseline, the median over cells, and for a ratio metric
// the geometric mean of the values; each cell as wide as the table's.
func (tm Timing) summaryRows(r *Report) [][]string {
	gm := []string{"geometric mean of ratios"}
	md := []string{"median over cells"}
	vg := []string{"geometric mean over cells"}
	for i, n := range r.TargetNames() {
		gm = append(gm, "")
		md = append(md, tm.SummaryText(tm.MedianOverCells[i]))
		if tm.ValueGeoMean != nil {
			vg = append(vg, tm.SummaryText(tm.ValueGeoMean[i]))
		}
		if n != r.Baseline {
			gm = append(gm, GeoText(tm.GeoMean[i]))
			md = append(md, "")
			vg = append(vg, "")
		}
	}
	rows := [][]string{gm, md}
	if tm.ValueGeoMean != nil {
		rows = append(rows, vg)
	}
	for _, st := range tm.Suites {
		sub := Timing{Unit: tm.Unit, n: tm.n, GeoMean: st.GeoMean, MedianOverCells: st.MedianOverCells, ValueGeoMean: st.ValueGeoMean}
		for _, sr := range sub.summaryRows(r) {
			sr[0] += ", " + st.Suite
			rows = append(rows, sr)
		}
	}
	return rows
}

func differenceValues(d Difference, names []string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, n+" "+grouped(d.Values[n]))
	}
	return strings.Join(parts, ", ")
}

func toolList(tools map[string]string) string {
	keys := make([]string, 0, len(tools))
	for k := range tools {
		keys = append(keys, k)
	}
	sortStrings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+tools[k])
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func dashInt(n int) string {
	if n == 0 {
		return "—"
	}
	return strconv.Itoa(n)
}

// writeCSV writes one tidy table: a row per count and per timing value.
func writeCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	names := r.TargetNames()
	rec := func(fields ...string) { cw.Write(fields) }
	rec("kind", "cell", "target", "metric", "value", "n", "ratio", "ci_low", "ci_high", "differs", "baseline",
		"value_ci_low", "value_ci_high", "value_no_difference", "value_suspect", "no_difference", "ratio_suspect")
	base := r.Baseline
	o := r.Summary
	summary := func(metric, value string) {
		rec("summary", "", "", metric, value, "", "", "", "", "", base, "", "", "", "", "", "")
	}
	summary("bundles", strings.Join(o.Bundles, " "))
	summary("samples", strconv.Itoa(o.Samples))
	summary("samplesOk", strconv.Itoa(o.SamplesOK))
	summary("samplesPerCell", strconv.Itoa(o.SamplesPerCell))
	summary("countsMatch", strconv.FormatBool(o.CountsMatch))
	summary("differentWork", strings.Join(o.DifferentWork, " "))
	summary("kernelOnly", strings.Join(o.KernelOnly, " "))
	for _, wn := range o.Warnings {
		summary("warning", wn)
	}
	for _, run := range r.Runs {
		if run.Signature != nil {
			rec("signature", "", "", run.RunID, run.Signature.State, "", "", "", "", "", base, "", "", "", "", "", "")
		}
	}
	for _, h := range o.Headlines {
		for _, hv := range []struct {
			metric string
			s      *Summary
			prec   int
		}{{"layerfsOverNative", h.LayerFSOverNative, 4}, {"commandVsBaseline", h.CommandVsBaseline, 4}, {"execOverheadNs", h.ExecOverheadNs, 0}, {"readyNs", h.ReadyNs, 0}} {
			if hv.s == nil {
				continue
			}
			lo, hi := bounds(hv.s.CI, hv.prec)
			rec("headline", "", h.Target, hv.metric, fixed(hv.s.Value, hv.prec), strconv.Itoa(hv.s.Cells), "", lo, hi, "", base, "", "", "", strconv.FormatBool(hv.s.Suspect > 0), boolText(hv.s.NoDifference), "")
		}
		for _, list := range []struct {
			metric string
			cells  []string
		}{{"faster", h.Faster}, {"slower", h.Slower}, {"noDifference", h.Same}, {"noInterval", h.Bare}, {"nativeNoDifference", h.NativeSame}} {
			if len(list.cells) > 0 {
				rec("headline", "", h.Target, list.metric, strings.Join(list.cells, " "), strconv.Itoa(len(list.cells)), "", "", "", "", base, "", "", "", "", "", "")
			}
		}
	}
	for _, t := range r.Targets {
		rec("target", "", t.Name, "fuseTransport", strings.Join(t.FUSETransports, " / "), strconv.Itoa(t.Samples), "", "", "", "", base, "", "", "", "", "", "")
		rec("target", "", t.Name, "undrainedWindows", strconv.Itoa(t.UndrainedWindows), strconv.Itoa(t.TimedWindows), "", "", "", "", base, "", "", "", "", "", "")
		for _, kv := range [][2]string{{"host", t.Host}, {"runnerHost", t.RunnerHost}, {"engineTransport", t.transportText()}} {
			rec("target", "", t.Name, kv[0], kv[1], "", "", "", "", "", base, "", "", "", "", "", "")
		}
	}
	for _, c := range r.Counts {
		for i, n := range names {
			rec("count", c.Cell, n, c.Count, c.Values[i], "", "", "", "", strconv.FormatBool(c.Differs), base, "", "", "", "", "", "")
		}
	}
	for _, c := range r.Opcodes {
		for i, n := range names {
			rec("count", c.Cell, n, c.Count, c.Values[i], "", "", "", "", strconv.FormatBool(c.Differs), base, "", "", "", "", "", "")
		}
	}
	for _, tm := range r.Timings {
		writeTimingCSV(rec, r, tm)
	}
	cw.Flush()
	return cw.Error()
}

func fixed(p *float64, prec int) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', prec, 64)
}

func bounds(iv *stats.Interval, prec int) (string, string) {
	if iv == nil {
		return "", ""
	}
	return strconv.FormatFloat(iv.Low, 'f', prec, 64), strconv.FormatFloat(iv.High, 'f', prec, 64)
}

func boolText(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// writeTimingCSV writes one timing's rows: a value per cell and target,
// then per target its summaries over cells with their intervals.
func writeTimingCSV(rec func(...string), r *Report, tm Timing) {
	names, base := r.TargetNames(), r.Baseline
	prec := 0 // nanoseconds
	if tm.Unit == UnitTimes {
		prec = 4
	}
	for _, tr := range tm.Rows {
		for i, n := range names {
			v := tr.Values[i]
			lo, hi := bounds(v.CI, 4)
			vlo, vhi := bounds(v.MedianCI, prec)
			rec("timing", tr.Cell, n, tm.Metric, fixed(v.MedianNs, prec), strconv.Itoa(v.N), fixed(v.Ratio, 4), lo, hi, "", base,
				vlo, vhi, boolText(v.MedianNoDifference), strconv.FormatBool(v.Suspect), boolText(v.NoDifference), strconv.FormatBool(v.RatioSuspect))
		}
	}
	for i, n := range names {
		g, md := tm.GeoMean[i], tm.MedianOverCells[i]
		lo, hi := bounds(g.CI, 4)
		rec("geomean", "", n, tm.Metric, "", strconv.Itoa(g.Cells), fixed(g.Value, 4), lo, hi, "", base, "", "", "", "", boolText(g.NoDifference), "")
		vlo, vhi := bounds(md.CI, prec)
		rec("median_over_cells", "", n, tm.Metric, fixed(md.Value, prec), strconv.Itoa(md.Cells), "", "", "", "", base, vlo, vhi, "", "", "", "")
		if tm.ValueGeoMean != nil {
			vg := tm.ValueGeoMean[i]
			vlo, vhi := bounds(vg.CI, prec)
			rec("value_geomean", "", n, tm.Metric, fixed(vg.Value, prec), strconv.Itoa(vg.Cells), "", "", "", "", base, vlo, vhi, boolText(vg.NoDifference), strconv.FormatBool(vg.Suspect > 0), "", "")
		}
	}
}

func sortStrings(s []string) { sort.Strings(s) }
