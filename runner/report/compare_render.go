package report

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
)

// WriteComparison renders c in format: "md", "html", "json" or "csv".
func WriteComparison(w io.Writer, c *Comparison, format string) error {
	bw := bufio.NewWriter(w)
	var err error
	switch format {
	case "md", "markdown":
		err = writeCompareMarkdown(bw, c)
	case "html":
		err = compareTmpl.Execute(bw, c)
	case "json":
		enc := json.NewEncoder(bw)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(c)
	case "csv":
		err = writeCompareCSV(bw, c)
	default:
		return fmt.Errorf("%w %q (want one of %s)", ErrFormat, format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return fmt.Errorf("writing the %s comparison: %w", format, err)
	}
	return bw.Flush()
}

// sideText names a side's runs and bundles.
func (s CompareSide) sideText() string {
	var runs []string
	for _, r := range s.Runs {
		runs = append(runs, r.RunID)
	}
	return strings.Join(runs, ", ") + " (bundle " + strings.Join(s.Bundles, ", ") + ")"
}

// Headline says what the comparison's values are.
func (c *Comparison) Headline() string {
	return fmt.Sprintf("Old %s against new %s; %s; %s. Values are medians with their bootstrap %s%% intervals in brackets (seed %d); "+
		"a change is new over old, each run resampled on its own; %s marks a change whose interval includes no change: %s.",
		c.Old.sideText(), c.New.sideText(), plural(len(c.Pairs), "target pair"), plural(len(c.Cells), "cell"),
		strconv.FormatFloat(c.Level*100, 'f', -1, 64), c.Seed, markTilde, markNoDifference)
}

// format writes one of cm's values, with its interval.
func (cm CompareMetric) format(v TimingValue) string {
	return Timing{Unit: cm.Unit}.MedianText(TimingValue{MedianNs: v.MedianNs, MedianCI: v.MedianCI})
}

// UnitText says what cm's values are.
func (cm CompareMetric) UnitText() string { return Timing{Unit: cm.Unit}.UnitText() }

// Table is cm as rows of text: cell, pair, old, new, change; then a
// geometric mean per pair.
func (cm CompareMetric) Table(pairs []TargetPair) [][]string {
	var rows [][]string
	for _, r := range cm.Rows {
		rows = append(rows, []string{r.Cell, r.Pair.String(), cm.format(r.Old), cm.format(r.New), r.ChangeText()})
	}
	for i, p := range pairs {
		g := "—"
		if s := cm.GeoMean[i]; s.Value != nil {
			g = pct(*s.Value) + intervalText(s.CI, pct) + marks(s.NoDifference, "")
		}
		rows = append(rows, []string{"geometric mean", p.String(), "", "", g})
	}
	return rows
}

func writeCompareMarkdown(w *bufio.Writer, c *Comparison) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# sealbench comparison\n\n%s\n", mdInline(c.Headline()))
	if len(c.Warnings) > 0 {
		p("\nBefore reading the changes:\n\n")
		for _, wn := range c.Warnings {
			p("- %s\n", mdInline(wn))
		}
	}
	for _, cm := range c.Metrics {
		p("\n## %s (%s)\n\n| cell | target | old | new | change |\n| --- | --- | --- | --- | --- |\n", cm.Title, cm.UnitText())
		for _, row := range cm.Table(c.Pairs) {
			for i := range row {
				row[i] = mdEscape(row[i])
			}
			p("| %s |\n", strings.Join(row, " | "))
		}
	}
	return nil
}

func writeCompareCSV(w io.Writer, c *Comparison) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"metric", "cell", "old_target", "new_target", "old", "old_ci_low", "old_ci_high", "old_n", "new", "new_ci_low", "new_ci_high", "new_n", "change", "change_ci_low", "change_ci_high", "no_change"})
	for _, cm := range c.Metrics {
		prec := 0
		if cm.Unit == UnitTimes {
			prec = 4
		}
		for _, r := range cm.Rows {
			olo, ohi := bounds(r.Old.MedianCI, prec)
			nlo, nhi := bounds(r.New.MedianCI, prec)
			clo, chi := bounds(r.ChangeCI, 4)
			cw.Write([]string{cm.Metric, r.Cell, r.Pair.Old, r.Pair.New, fixed(r.Old.MedianNs, prec), olo, ohi, strconv.Itoa(r.Old.N),
				fixed(r.New.MedianNs, prec), nlo, nhi, strconv.Itoa(r.New.N), fixed(r.Change, 4), clo, chi, boolText(r.NoChange)})
		}
		for i, p := range c.Pairs {
			g := cm.GeoMean[i]
			lo, hi := bounds(g.CI, 4)
			cw.Write([]string{cm.Metric, "", p.Old, p.New, "", "", "", "", "", "", "", "", fixed(g.Value, 4), lo, hi, boolText(g.NoDifference)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// Chart draws cm's changes per cell and pair, new over old, with their
// intervals and a line at no change.
func (cm CompareMetric) Chart(pairs []TargetPair) template.HTML {
	c := valueChart{ref: 1, unit: "new over old (the line: no change)", caption: cm.Title + ": change, new over old"}
	for i, p := range pairs {
		c.series = append(c.series, p.String())
		c.colours = append(c.colours, palette[i%len(palette)])
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range cm.Rows {
		if r.Change == nil {
			continue
		}
		g, ok := groups[r.Cell]
		if !ok {
			g = &group{label: r.Cell}
			groups[r.Cell] = g
			order = append(order, r.Cell)
		}
		p := point{value: *r.Change, faint: r.NoChange != nil && *r.NoChange, label: pct(*r.Change) + marks(r.NoChange, ""),
			title: r.Pair.String() + " " + r.Cell + ": " + r.ChangeText()}
		for i, pair := range pairs {
			if pair == r.Pair {
				p.series = i
			}
		}
		if r.ChangeCI != nil {
			p.hasCI, p.lo, p.hi = true, r.ChangeCI.Low, r.ChangeCI.High
		}
		g.points = append(g.points, p)
	}
	for _, cell := range order {
		c.groups = append(c.groups, *groups[cell])
	}
	if len(c.groups) == 0 {
		return ""
	}
	return c.svg()
}

var compareTmpl = template.Must(template.New("compare").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sealbench comparison</title>
<style>
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; overflow-wrap: break-word; }
main { max-width: 64em; margin: 0 auto; padding: 1em 1.2em 3em; }
.warn { background: #fff8c5; border-left: 4px solid #9a6700; padding: 0.6em 0.9em; border-radius: 6px; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 0.92em; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: right; }
th { background: #f6f8fa; } th:first-child, td:first-child, td:nth-child(2) { text-align: left; }
` + chartCSS + `</style>
</head>
<body>
<main>
<h1>sealbench comparison</h1>
<p>{{.Headline}}</p>
{{- if .Warnings}}
<div class="warn"><strong>Before reading the changes:</strong><ul>
{{- range .Warnings}}
<li>{{.}}</li>
{{- end}}
</ul></div>
{{- end}}
{{- $pairs := .Pairs}}
{{- range .Metrics}}
<h2>{{.Title}} ({{.UnitText}})</h2>
{{- with .Chart $pairs}}
<figure>
{{.}}
</figure>
{{- end}}
<div class="wide"><table>
<tr><th>cell</th><th>target</th><th>old</th><th>new</th><th>change</th></tr>
{{- range .Table $pairs}}
<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</table></div>
{{- end}}
</main>
</body>
</html>
`))
