package report

import (
	"bufio"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The page is one file: inline CSS, inline SVG, no script, no external
// asset, so it can be mailed, archived and opened anywhere.

// palette colours targets in order.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"}

type chart struct {
	Width, Height      int
	AxisX, GridBottom  string
	TickLabelY         string
	AxisLabel, Caption string
	Ticks              []tick
	Rows               []chartRow
	Legend             []legendItem
}

type tick struct{ X, Label string }

type chartRow struct {
	LabelY, Label string
	Bars          []bar
}

// bar holds coordinates already formatted, so the template only places them.
type bar struct {
	X, Y, W, H     string
	Colour, Label  string
	Text           string
	TextX, TextY   string
	HasCI          bool
	CILo, CIHi, CY string
	Faint          bool
}

type legendItem struct{ RectX, TextX, Colour, Name string }

const (
	chartLeft   = 60.0
	chartWidth  = 520.0
	barHeight   = 10.0
	rowGap      = 8.0
	chartTop    = 28.0
	chartBottom = 24.0
)

func f1(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// makeChart draws one timing: per cell a group of bars, one per target,
// each the ratio of its median to the baseline's, with a line at 1.
func makeChart(r *Report, tm Timing) chart {
	names := r.TargetNames()
	maxR := 1.0
	for _, row := range tm.Rows {
		for _, v := range row.Values {
			if v.Ratio != nil {
				maxR = math.Max(maxR, *v.Ratio)
			}
			if v.CI != nil {
				maxR = math.Max(maxR, v.CI.High)
			}
		}
	}
	// A round scale: the next 0.5 above the largest ratio.
	scaleMax := math.Max(1.5, math.Ceil(maxR*2)/2)
	x := func(ratio float64) float64 { return chartLeft + chartWidth*ratio/scaleMax }
	// Room on the right for the longest label: a ratio, its interval and
	// its marks.
	c := chart{Width: int(chartLeft + chartWidth + 300), AxisX: f1(x(1)), AxisLabel: r.Baseline}
	y := chartTop
	for _, row := range tm.Rows {
		cr := chartRow{LabelY: f1(y + 12), Label: row.Cell}
		for i, v := range row.Values {
			by := y + float64(i)*barHeight
			b := bar{X: f1(chartLeft), Y: f1(by), H: f1(barHeight - 1), Colour: palette[i%len(palette)], Label: names[i], TextY: f1(by + 8), Text: "—"}
			w := 0.0
			if v.Ratio != nil {
				w = x(*v.Ratio) - chartLeft
				b.Text = RatioText(v)
			}
			b.W = f1(w)
			textX := chartLeft + w + 4
			if v.CI != nil {
				b.HasCI, b.CILo, b.CIHi, b.CY = true, f1(x(v.CI.Low)), f1(x(v.CI.High)), f1(by+(barHeight-1)/2)
				textX = math.Max(textX, x(v.CI.High)+4)
			}
			// A ratio that shows nothing, or divides a suspect value, is
			// drawn faint: the eye should not weigh it as the others.
			if v.RatioSuspect || v.NoDifference != nil && *v.NoDifference {
				b.Faint = true
			}
			b.TextX = f1(textX)
			cr.Bars = append(cr.Bars, b)
		}
		c.Rows = append(c.Rows, cr)
		y += float64(len(names))*barHeight + rowGap
	}
	c.Height = int(y + chartBottom)
	c.GridBottom, c.TickLabelY = f1(float64(c.Height)-20), f1(float64(c.Height)-6)
	for t := 0.0; t <= scaleMax+1e-9; t += 0.5 {
		c.Ticks = append(c.Ticks, tick{X: f1(x(t)), Label: strconv.FormatFloat(t, 'f', 1, 64)})
	}
	for i, n := range names {
		lx := chartLeft + float64(i)*110
		c.Legend = append(c.Legend, legendItem{RectX: f1(lx), TextX: f1(lx + 14), Colour: palette[i%len(palette)], Name: n})
	}
	c.Caption = tm.Title + ": ratio to " + r.Baseline
	return c
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms":       ms,
	"ratioOf":  RatioText,
	"geo":      GeoText,
	"headline": func(r *Report) string { return r.headline() },
	"grouped":  grouped,
	"title":    CountTitle,
	"chart":    func(r *Report, tm Timing) chart { return makeChart(r, tm) },
	"nsms":     func(ns int64) string { return ms(float64(ns)) },
	"short":    short,
	"dash":     dash,
	"dashInt":  dashInt,
	"when":     when,
	"gib":      gib,
	"tools":    toolList,
	"diff":     func(d Difference, names []string) string { return differenceValues(d, names) },
	"notBase":  func(r *Report, n string) bool { return n != r.Baseline },
	"load": func(a, b float64) string {
		return strconv.FormatFloat(a, 'f', 2, 64) + "–" + strconv.FormatFloat(b, 'f', 2, 64)
	},
	"join": strings.Join,
}).Parse(pageHTML))

func writeHTML(w *bufio.Writer, r *Report) error {
	return pageTmpl.Execute(w, r)
}

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sealbench report: {{join .TargetNames ", "}}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child, td.l { text-align: left; }
tr.differs td { background: #fde2e1; }
tr.summary td { font-weight: 600; background: #f4f4f4; }
.ok { color: #1a7f37; } .bad { color: #c62828; font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; fill: #222; }
figure { margin: 0.5em 0 2em; } figcaption { color: #555; }
code { font-size: 90%; }
ul.timing-notes { color: #8a4b00; }
</style>
</head>
<body>
<h1>sealbench report</h1>
<p>Targets: {{join .TargetNames ", "}}. Baseline: <strong>{{.Baseline}}</strong>. Cells: {{len .Cells}}. {{headline .}}</p>

<h2>Provenance</h2>
<table>
<tr><th>run</th><th>bundle</th><th>Sandbox image</th><th>runner</th><th>stand-in</th><th>Store</th><th>workers</th><th>samples</th><th>seed</th><th>start</th><th>end</th><th>lock wait max (ms)</th><th>load 1m</th></tr>
{{- range .Runs}}
<tr><td>{{.RunID}}</td><td class="l"><code>{{.BundleID}}</code></td><td class="l"><code>{{short .ImageID}}</code></td><td class="l"><code>{{short .RunnerSHA256}}</code></td><td class="l"><code>{{short .StandinSHA256}}</code></td><td>{{dash .StoreProfile}}</td><td>{{dashInt .ConstructionWorkers}}</td><td>{{dashInt .SamplesPerCell}}</td><td>{{.Seed}}</td><td>{{when .Start}}</td><td>{{when .End}}</td><td>{{nsms .LockWaitMaxNs}}</td><td>{{load .Load1Min .Load1Max}}</td></tr>
{{- end}}
</table>
<table>
<tr><th>target</th><th>run</th><th>engine</th><th>kernel</th><th>CPUs</th><th>memory</th><th>emulated</th><th>FUSE transport</th><th>samples</th></tr>
{{- range .Targets}}
<tr><td>{{.Name}}</td><td>{{.RunID}}</td><td>{{dash .Engine}}</td><td>{{dash .Kernel}}</td><td>{{dashInt .CPUs}}</td><td>{{if .MemoryBytes}}{{gib .MemoryBytes}}{{else}}—{{end}}</td><td>{{.Emulated}}</td><td>{{.FUSETransportText}}</td><td>{{.Samples}}</td></tr>
{{- end}}
</table>
{{- range .Runs}}{{if .Tools}}
<p>Tools ({{.RunID}}): {{tools .Tools}}</p>
{{- end}}{{end}}

<h2>1. Same work: exact counts</h2>
{{- if .Differences}}
<p class="bad">{{len .Differences}} difference(s) between targets (or between one target's samples), marked ✗ and listed below: the timings of those cells do not compare the same work.</p>
{{- else}}
<p class="ok">Every count is equal across all targets in every cell, so the timings below compare the same work.</p>
{{- end}}
<table>
<tr><th>cell</th><th>count</th>{{range .TargetNames}}<th>{{.}}</th>{{end}}<th></th></tr>
{{- range .Counts}}
<tr{{if .Differs}} class="differs"{{end}}><td>{{.Cell}}</td><td class="l">{{title .Count}}</td>{{range .Values}}<td>{{grouped .}}</td>{{end}}<td>{{if .Differs}}✗{{end}}</td></tr>
{{- end}}
</table>
{{- if .Differences}}
<p>Differences:</p>
<ul>
{{- $names := .TargetNames}}
{{- range .Differences}}
<li>{{.Cell}} {{title .Count}}: {{diff . $names}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .Problems}}
<p>Failed and ineligible samples (kept, never retried):</p>
<ul>
{{- range .Problems}}
<li>{{.Target}} {{.Cell}} round {{.Round}}: <span class="bad">{{.Status}}</span>: {{.Reason}}{{if .Detail}} ({{.Detail}}){{end}}</li>
{{- end}}
</ul>
{{- end}}

<h2>2. Timings</h2>
{{- $r := .}}
{{- range .Timings}}
{{- $tm := .}}
<h3>{{.Title}} ({{.UnitText}}; ratio to {{$r.Baseline}})</h3>
<table>
<tr><th>cell</th>{{range $r.TargetNames}}<th>{{.}}</th>{{if notBase $r .}}<th>ratio</th>{{end}}{{end}}</tr>
{{- range .Rows}}
<tr><td>{{.Cell}}</td>{{range $i, $v := .Values}}<td{{if $v.Suspect}} class="bad"{{end}}>{{$tm.MedianText $v}}</td>{{if notBase $r (index $r.Targets $i).Name}}<td{{if $v.RatioSuspect}} class="bad"{{end}}>{{ratioOf $v}}</td>{{end}}{{end}}</tr>
{{- end}}
<tr class="summary"><td>geometric mean of ratios</td>{{range $i, $t := $r.Targets}}<td></td>{{if notBase $r $t.Name}}<td>{{geo (index $tm.GeoMean $i)}}</td>{{end}}{{end}}</tr>
<tr class="summary"><td>median over cells</td>{{range $i, $t := $r.Targets}}<td>{{$tm.SummaryText (index $tm.MedianOverCells $i)}}</td>{{if notBase $r $t.Name}}<td></td>{{end}}{{end}}</tr>
</table>
{{- if .Notes}}
<ul class="timing-notes">
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- with $c := chart $r .}}
<figure>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Caption}}">
{{- range .Legend}}
<rect x="{{.RectX}}" y="4" width="10" height="10" fill="{{.Colour}}"/><text x="{{.TextX}}" y="13">{{.Name}}</text>
{{- end}}
{{- range .Ticks}}
<line x1="{{.X}}" y1="22" x2="{{.X}}" y2="{{$c.GridBottom}}" stroke="#ddd"/><text x="{{.X}}" y="{{$c.TickLabelY}}" text-anchor="middle">{{.Label}}</text>
{{- end}}
<line x1="{{.AxisX}}" y1="22" x2="{{.AxisX}}" y2="{{.GridBottom}}" stroke="#333" stroke-dasharray="3,2"/>
{{- range .Rows}}
<text x="4" y="{{.LabelY}}">{{.Label}}</text>
{{- range .Bars}}
<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Colour}}"{{if .Faint}} fill-opacity="0.35"{{end}}><title>{{.Label}}: {{.Text}}</title></rect>
{{- if .HasCI}}<line x1="{{.CILo}}" y1="{{.CY}}" x2="{{.CIHi}}" y2="{{.CY}}" stroke="#000"/>{{end}}
<text x="{{.TextX}}" y="{{.TextY}}">{{.Text}}</text>
{{- end}}
{{- end}}
</svg>
<figcaption>{{.Caption}}; the dashed line is {{.AxisLabel}} (1.0){{if $r.Multi}}; whiskers are the bootstrap intervals; faint bars show no difference or divide a suspect value{{end}}.</figcaption>
</figure>
{{- end}}
{{- end}}
{{- if .Notes}}

<h2>Notes</h2>
<ul>
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
</body>
</html>
`
