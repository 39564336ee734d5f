package report

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

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

// marks writes ", no difference shown" where an interval includes 1.0 and
// ", suspect reference" where the value is suspect.
func marks(noDifference *bool, suspect bool) string {
	s := ""
	if noDifference != nil && *noDifference {
		s += ", " + markNoDifference
	}
	if suspect {
		s += ", " + markSuspect
	}
	return s
}

// RatioText is a value's ratio to the baseline, with its interval and
// marks: "1.04x [0.97, 1.12], no difference shown"; "" when there is no
// ratio.
func RatioText(v TimingValue) string {
	if v.Ratio == nil {
		return ""
	}
	return times(*v.Ratio) + intervalText(v.CI, ratio) + marks(v.NoDifference, v.RatioSuspect)
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
// ("275.0 [262.1, 290.4]", "0.23x [0.20, 0.26], suspect reference"), or a
// dash.
func (tm Timing) MedianText(v TimingValue) string {
	if v.MedianNs == nil {
		return "—"
	}
	return tm.Format(*v.MedianNs) + intervalText(v.MedianCI, tm.bound) + marks(v.MedianNoDifference, v.Suspect)
}

// SummaryText writes a median over cells, or a dash.
func (tm Timing) SummaryText(s Summary) string { return summaryText(s, tm.Format) }

// GeoText writes a geometric mean of ratios, or a dash.
func GeoText(s Summary) string { return summaryText(s, times) }

// summaryText writes s by f, saying how many of its cells are suspect.
func summaryText(s Summary, f func(float64) string) string {
	if s.Value == nil {
		return "—"
	}
	if s.Suspect == 0 {
		return f(*s.Value)
	}
	return f(*s.Value) + ", including " + plural(s.Suspect, "suspect cell")
}

// headline says what the timings' values are.
func (r *Report) headline() string {
	if r.Multi() {
		return fmt.Sprintf("Values are medians, each with its bootstrap %s%% interval in brackets (seed %d); a ratio whose interval includes 1.0 is marked \"%s\".",
			strconv.FormatFloat(r.Level*100, 'f', -1, 64), r.Seed, markNoDifference)
	}
	return "One sample per cell and target: values stand bare, without intervals (see the notes)."
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

	p("# sealbench report\n\n")
	p("Targets: %s. Baseline: **%s**. Cells: %d. %s", strings.Join(names, ", "), r.Baseline, len(r.Cells), r.headline())
	p("\n\n## Provenance\n\n")
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
		mem := "—"
		if t.MemoryBytes > 0 {
			mem = gib(t.MemoryBytes)
		}
		row(t.Name, t.RunID, dash(t.Engine), dash(t.Kernel), dashInt(t.CPUs), mem, strconv.FormatBool(t.Emulated), t.FUSETransportText(), strconv.Itoa(t.Samples))
	}
	for _, run := range r.Runs {
		if len(run.Tools) > 0 {
			p("\nTools (%s): %s\n", mdInline(run.RunID), mdInline(toolList(run.Tools)))
		}
	}

	p("\n## 1. Same work: exact counts\n\n")
	if len(r.Differences) == 0 {
		p("Every count is equal across all targets in every cell, so the timings below compare the same work.\n\n")
	} else if r.Explained() {
		p("**%d difference(s)** between targets, marked ✗ and listed below, each in FUSE request counts between targets that run different kernels: the files, bytes and results are the same work; the kernels sent the daemon different requests for it.\n\n", len(r.Differences))
	} else {
		p("**%d difference(s)** between targets (or between one target's samples), marked ✗ and listed below: the timings of those cells do not compare the same work.\n\n", len(r.Differences))
	}
	row(append(append([]string{"cell", "count"}, names...), "")...)
	sep(len(names) + 3)
	for _, c := range r.Counts {
		mark := ""
		if c.Differs {
			mark = "✗"
		}
		vals := make([]string, len(c.Values))
		for i, v := range c.Values {
			vals[i] = grouped(v)
		}
		row(append(append([]string{c.Cell, CountTitle(c.Count)}, vals...), mark)...)
	}
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
	if len(r.Problems) > 0 {
		p("\nFailed and ineligible samples (kept, never retried):\n\n")
		for _, pr := range r.Problems {
			p("- %s %s round %d: %s: %s", pr.Target, pr.Cell, pr.Round, pr.Status, mdEscape(pr.Reason))
			if pr.Detail != "" {
				p(" (%s)", mdEscape(pr.Detail))
			}
			p("\n")
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
			cells := []string{tr.Cell}
			for i, n := range names {
				cells = append(cells, tm.MedianText(tr.Values[i]))
				if n != r.Baseline {
					cells = append(cells, RatioText(tr.Values[i]))
				}
			}
			row(cells...)
		}
		gm := []string{"geometric mean of ratios"}
		md := []string{"median over cells"}
		for i, n := range names {
			gm = append(gm, "")
			md = append(md, tm.SummaryText(tm.MedianOverCells[i]))
			if n != r.Baseline {
				gm = append(gm, GeoText(tm.GeoMean[i]))
				md = append(md, "")
			}
		}
		row(gm...)
		row(md...)
		if len(tm.Notes) > 0 {
			p("\n")
			for _, n := range tm.Notes {
				p("- %s\n", mdEscape(n))
			}
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
	for _, t := range r.Targets {
		rec("target", "", t.Name, "fuseTransport", strings.Join(t.FUSETransports, " / "), strconv.Itoa(t.Samples), "", "", "", "", base, "", "", "", "", "", "")
		rec("target", "", t.Name, "undrainedWindows", strconv.Itoa(t.UndrainedWindows), strconv.Itoa(t.TimedWindows), "", "", "", "", base, "", "", "", "", "", "")
	}
	for _, c := range r.Counts {
		for i, n := range names {
			rec("count", c.Cell, n, c.Count, c.Values[i], "", "", "", "", strconv.FormatBool(c.Differs), base, "", "", "", "", "", "")
		}
	}
	for _, d := range r.Differences {
		if !strings.HasPrefix(d.Count, "fuseRequests.") {
			continue // the count rows above carry them
		}
		for _, n := range names {
			rec("count", d.Cell, n, d.Count, d.Values[n], "", "", "", "", "true", base, "", "", "", "", "", "")
		}
	}
	f := func(p *float64, prec int) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', prec, 64)
	}
	bounds := func(iv *stats.Interval, prec int) (string, string) {
		if iv == nil {
			return "", ""
		}
		return strconv.FormatFloat(iv.Low, 'f', prec, 64), strconv.FormatFloat(iv.High, 'f', prec, 64)
	}
	flag := func(b *bool) string {
		if b == nil {
			return ""
		}
		return strconv.FormatBool(*b)
	}
	for _, tm := range r.Timings {
		prec := 0 // nanoseconds
		if tm.Unit == UnitTimes {
			prec = 4
		}
		for _, tr := range tm.Rows {
			for i, n := range names {
				v := tr.Values[i]
				lo, hi := bounds(v.CI, 4)
				vlo, vhi := bounds(v.MedianCI, prec)
				rec("timing", tr.Cell, n, tm.Metric, f(v.MedianNs, prec), strconv.Itoa(v.N), f(v.Ratio, 4), lo, hi, "", base,
					vlo, vhi, flag(v.MedianNoDifference), strconv.FormatBool(v.Suspect), flag(v.NoDifference), strconv.FormatBool(v.RatioSuspect))
			}
		}
		for i, n := range names {
			rec("geomean", "", n, tm.Metric, "", strconv.Itoa(tm.GeoMean[i].Cells), f(tm.GeoMean[i].Value, 4), "", "", "", base, "", "", "", "", "", "")
			rec("median_over_cells", "", n, tm.Metric, f(tm.MedianOverCells[i].Value, prec), strconv.Itoa(tm.MedianOverCells[i].Cells), "", "", "", "", base, "", "", "", "", "", "")
		}
	}
	cw.Flush()
	return cw.Error()
}

func sortStrings(s []string) { sort.Strings(s) }
