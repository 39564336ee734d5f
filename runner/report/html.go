package report

import (
	"bufio"
	"cmp"
	"html/template"
	"slices"
	"strconv"
	"strings"
)

// The page is one file: inline CSS, inline SVG, no script, no external
// asset, so it can be mailed, archived and opened anywhere. It reads top
// down as the Markdown does: the summary, the counts, the timings (charts
// first, their tables folded), then provenance and notes. It fits a
// phone's width: charts scale with the page, cards wrap, and the few wide
// tables scroll inside their own box.

// page is what the template renders: the report, and what the report
// looks like laid out.
type page struct {
	*Report
	Ran, Counts  string
	AA           string   // the A/A check's line; "" without one
	AAOK         bool     // no cell outside 0.9-1.1
	Machines     []string // the machines whose balloon reports free pages
	Signatures   []string
	SignaturesOK bool // every run's signature verified
	Cards        []card
	CountMatrix  matrix
	OpMatrix     matrix
	OpChart      template.HTML
	Sections     []section
	Legend       string
	TargetColour map[string]string
}

type card struct {
	Name, Colour string
	Baseline     bool
	Figures      []figure
	Shown        []string // lines: which differences are shown, which not
}

type figure struct{ Name, Value, Interval string }

// section is one timing: its chart (where the timing is charted), the
// ratio chart (command time, two targets or more), its table.
type section struct {
	Timing
	Chart, RatioChart template.HTML
	Charted           bool
	Table             [][]string
	Head              []string
	Suspect           [][]bool // per table cell
	SummaryFrom       int      // the first row of the summaries over cells
}

// charted are the timings drawn as charts of their values.
var charted = []string{"commandNs", "layerfsOverNative", "nativeRepeatOverNative", "execOverheadNs", "commitNs"}

func makePage(r *Report) page {
	pg := page{Report: r, Ran: r.Summary.ranText(), Counts: r.Summary.countsVerdict(), AA: r.Summary.aaText(), AAOK: true,
		Machines: r.machineLines(), Signatures: r.signatureLines(), TargetColour: map[string]string{}}
	for i, t := range r.Targets {
		pg.TargetColour[t.Name] = palette[i%len(palette)]
	}
	pg.SignaturesOK = true
	for _, run := range r.Runs {
		pg.SignaturesOK = pg.SignaturesOK && run.Signature != nil && run.Signature.State == SignatureVerified
	}
	for _, h := range r.Summary.Headlines {
		c := card{Name: h.Target, Colour: pg.TargetColour[h.Target], Baseline: h.Baseline && len(r.Targets) > 1}
		shown := h.shownText(r.Baseline)
		if c.Baseline {
			shown = "the baseline: the other targets' ratios are to its values"
		}
		for _, line := range []string{h.nativeText(), shown} {
			if line != "" {
				c.Shown = append(c.Shown, strings.ToUpper(line[:1])+line[1:]+".")
			}
		}
		if h.AA != nil && len(h.AA.Outside) > 0 {
			pg.AAOK = false
		}
		add := func(name string, s *Summary, f, bound func(float64) string) {
			switch {
			case s == nil:
				return
			case s.Inconclusive:
				c.Figures = append(c.Figures, figure{Name: name, Value: "inconclusive", Interval: strconv.Itoa(len(s.LeftOut)) + " of " +
					strconv.Itoa(len(s.LeftOut)+s.Cells) + " cells left out: " + leftOutText(s.LeftOut)})
				return
			}
			v := f(*s.Value) + marks(s.NoDifference, "")
			iv := strings.TrimPrefix(intervalText(s.CI, bound), " ")
			if s.Suspect > 0 {
				iv += " including " + plural(s.Suspect, "suspect cell")
			}
			if len(s.LeftOut) > 0 {
				iv += " over " + plural(s.Cells, "cell") + "; " + leftOutText(s.LeftOut)
			}
			c.Figures = append(c.Figures, figure{Name: name, Value: v, Interval: iv})
		}
		add("LayerFS over native, geomean over cells", h.LayerFSOverNative, times, ratio)
		add("command time vs "+r.Baseline+", geomean", h.CommandVsBaseline, times, ratio)
		add("per-exec overhead, median over cells"+h.transportText(), h.ExecOverheadNs, func(v float64) string { return ms(v) + " ms" }, ms)
		add("a usable Sandbox, median over cells"+cmp.Or(h.warmText(), ", cold"), h.ReadyNs, func(v float64) string { return ms(v) + " ms" }, ms)
		for _, sh := range h.Suites {
			add("LayerFS over native, geomean over "+sh.Suite+"'s cells", sh.LayerFSOverNative, times, ratio)
			add("command time vs "+r.Baseline+", geomean over "+sh.Suite+"'s cells", sh.CommandVsBaseline, times, ratio)
		}
		if t := h.AA.Text(); t != "" {
			v, rest, _ := strings.Cut(strings.TrimPrefix(t, "within "), " ")
			if !strings.HasPrefix(t, "within ") {
				v, rest = "outside", strings.TrimPrefix(t, "outside ")
			}
			c.Figures = append(c.Figures, figure{Name: "A/A: the native reference timed twice", Value: v, Interval: rest})
		}
		pg.Cards = append(pg.Cards, c)
	}
	pg.CountMatrix = r.countMatrix(r.Counts, countKeys())
	if len(r.Opcodes) > 0 {
		pg.OpMatrix = r.countMatrix(r.Opcodes, nil)
		pg.OpChart = opcodeChart(r, pg.OpMatrix).svg()
	}
	for _, tm := range r.Timings {
		sec := section{Timing: tm, Charted: slices.Contains(charted, tm.Metric)}
		if sec.Charted {
			sec.Chart = timingChart(r, tm).svg()
			if tm.Metric == "commandNs" && len(r.Targets) >= 2 {
				sec.RatioChart = ratioChart(r, tm).svg()
			}
		}
		sec.Head = []string{"cell"}
		for _, n := range r.TargetNames() {
			sec.Head = append(sec.Head, n)
			if n != r.Baseline {
				sec.Head = append(sec.Head, "ratio")
			}
		}
		for _, row := range tm.Rows {
			cells, sus := []string{r.CellLabel(row.Cell)}, []bool{false}
			for i, n := range r.TargetNames() {
				v := row.Values[i]
				cells, sus = append(cells, tm.MedianText(v)), append(sus, v.Suspect)
				if n != r.Baseline {
					cells, sus = append(cells, RatioText(v)), append(sus, v.RatioSuspect)
				}
			}
			sec.Table, sec.Suspect = append(sec.Table, cells), append(sec.Suspect, sus)
		}
		sec.SummaryFrom = len(sec.Table)
		for _, sr := range tm.summaryRows(r) {
			sec.Table, sec.Suspect = append(sec.Table, sr), append(sec.Suspect, make([]bool, len(sr)))
		}
		pg.Sections = append(pg.Sections, sec)
	}
	pg.Legend = r.headline()
	return pg
}

// timingChart charts one timing's values per cell and target.
func timingChart(r *Report, tm Timing) valueChart {
	c := valueChart{unit: "ms", caption: tm.Title}
	scaleBy := 1e6 // ns to ms
	if tm.Unit == UnitTimes {
		c.ref, c.refName, c.unit, scaleBy = 1, "native", "times native (the line: as fast as native)", 1
	}
	for i, t := range r.Targets {
		c.series = append(c.series, t.Name)
		c.colours = append(c.colours, palette[i%len(palette)])
	}
	for _, row := range tm.Rows {
		g := group{label: row.Cell}
		for i, v := range row.Values {
			if v.MedianNs == nil {
				continue
			}
			p := point{series: i, value: *v.MedianNs / scaleBy, suspect: v.Suspect, samples: scaled(v.Samples, scaleBy),
				faint: v.MedianNoDifference != nil && *v.MedianNoDifference,
				label: tm.Format(*v.MedianNs) + marks(v.MedianNoDifference, ""),
				title: r.Targets[i].Name + " " + r.CellLabel(row.Cell) + ": " + tm.MedianText(v)}
			if v.MedianCI != nil {
				p.hasCI, p.lo, p.hi = true, v.MedianCI.Low/scaleBy, v.MedianCI.High/scaleBy
			}
			g.points = append(g.points, p)
		}
		if len(g.points) > 0 {
			c.groups = append(c.groups, g)
		}
	}
	return c
}

// scaled is each value divided by by.
func scaled(values []float64, by float64) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = v / by
	}
	return out
}

// ratioChart charts each target's ratio to the baseline, per cell, with
// a line at 1: it says something only with two targets or more.
func ratioChart(r *Report, tm Timing) valueChart {
	c := valueChart{ref: 1, refName: r.Baseline, unit: "ratio to " + r.Baseline + " (the line: as fast)", caption: tm.Title + ": ratio to " + r.Baseline}
	var index []int
	for i, t := range r.Targets {
		if t.Name != r.Baseline {
			c.series = append(c.series, t.Name)
			c.colours = append(c.colours, palette[i%len(palette)])
			index = append(index, i)
		}
	}
	for _, row := range tm.Rows {
		g := group{label: row.Cell}
		for si, i := range index {
			v := row.Values[i]
			if v.Ratio == nil {
				continue
			}
			p := point{series: si, value: *v.Ratio, suspect: v.RatioSuspect,
				faint: v.NoDifference != nil && *v.NoDifference,
				label: times(*v.Ratio) + marks(v.NoDifference, ""),
				title: r.Targets[i].Name + " " + r.CellLabel(row.Cell) + ": " + RatioText(v)}
			if v.CI != nil {
				p.hasCI, p.lo, p.hi = true, v.CI.Low, v.CI.High
			}
			g.points = append(g.points, p)
		}
		if len(g.points) > 0 {
			c.groups = append(c.groups, g)
		}
	}
	return c
}

// opcodeChart stacks each cell's FUSE requests by opcode: one bar where
// the targets agree, one per target where they do not.
func opcodeChart(r *Report, m matrix) stackedChart {
	c := stackedChart{parts: m.Columns, caption: "FUSE requests by opcode, per cell"}
	byCell := map[string]map[string]CountRow{}
	for _, row := range r.Opcodes {
		if byCell[row.Cell] == nil {
			byCell[row.Cell] = map[string]CountRow{}
		}
		byCell[row.Cell][row.Count] = row
	}
	first := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.SplitN(v, " / ", 2)[0], 10, 64)
		return n
	}
	for _, cell := range r.Cells {
		rows, ok := byCell[cell.Name]
		if !ok {
			continue
		}
		agree := true
		for _, row := range rows {
			agree = agree && !row.Differs
		}
		g := stackGroup{label: cell.Name}
		for i, n := range r.TargetNames() {
			if agree && i > 0 {
				break
			}
			b := stackBar{}
			if !agree {
				b.name = n
			}
			var total int64
			for _, k := range m.Keys {
				var v int64 // a cell that sent no request of k has no row for it
				if row, ok := rows[k]; ok {
					v = first(row.Values[i])
				}
				b.counts = append(b.counts, v)
				total += v
			}
			b.total = grouped(strconv.FormatInt(total, 10))
			g.bars = append(g.bars, b)
		}
		c.groups = append(c.groups, g)
	}
	return c
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"nsms":    func(ns int64) string { return ms(float64(ns)) },
	"short":   short,
	"dash":    dash,
	"dashInt": dashInt,
	"when":    when,
	"tools":   toolList,
	"title":   CountTitle,
	"diff":    func(d Difference, names []string) string { return differenceValues(d, names) },
	"load": func(a, b float64) string {
		return strconv.FormatFloat(a, 'f', 2, 64) + "–" + strconv.FormatFloat(b, 'f', 2, 64)
	},
	"join": strings.Join,
	"css":  func(s string) template.CSS { return template.CSS(s) },
}).Parse(pageHTML + matrixHTML))

// chartCSS styles the charts, on the report's page and the comparison's.
const chartCSS = `figure { margin: 0.6em 0 1.2em; }
figure svg { display: block; width: 100%; max-width: 40em; height: auto; }
figcaption { color: #57606a; font-size: 0.88em; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", sans-serif; fill: #1f2328; }
svg text.tick { fill: #57606a; font-size: 10px; } svg text.cell { font-weight: 600; }
svg text.bad { fill: #cf222e; }
svg .grid { stroke: #eaeef2; } svg .ref { stroke: #1f2328; stroke-dasharray: 3 2; }
svg .ci { stroke: #1f2328; stroke-width: 1.2; fill: none; }
svg circle.sample { fill: #ffffff; stroke: #1f2328; stroke-width: 0.8; }
svg rect.faint { fill-opacity: 0.35; } svg rect.suspect { stroke: #cf222e; stroke-width: 1.5; }
`

// matrixHTML draws a count matrix: a value once where the targets agree,
// each target's on a line of its own where they differ.
const matrixHTML = `{{define "matrix"}}<div class="wide"><table>
<tr><th>cell</th>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{- range .Rows}}
<tr><td>{{.Label}}</td>{{range .Values}}{{if .Parts}}<td class="{{if .Differs}}differs{{else}}kernel{{end}}"{{if .Why}} title="{{.Why}}"{{end}}>{{if .Differs}}✗{{else}}†{{end}}{{range .Parts}}<br><span class="nw">{{.}}</span>{{end}}</td>{{else}}<td>{{.Text}}</td>{{end}}{{end}}</tr>
{{- end}}
</table></div>{{end}}`

func writeHTML(w *bufio.Writer, r *Report) error {
	return pageTmpl.Execute(w, makePage(r))
}

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sealbench report: {{join .TargetNames ", "}}</title>
<style>
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; background: #fff; overflow-wrap: break-word; }
main { max-width: 64em; margin: 0 auto; padding: 1em 1.2em 3em; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.1em; }
h2 { font-size: 1.25em; margin: 1.8em 0 0.5em; padding-bottom: 0.2em; border-bottom: 1px solid #d8dee4; }
h3 { font-size: 1.05em; margin: 1.4em 0 0.3em; }
.ran { color: #57606a; margin: 0 0 1em; }
.verdict { padding: 0.6em 0.9em; border-radius: 6px; margin: 0.6em 0; }
.verdict.ok { background: #dafbe1; border-left: 4px solid #1a7f37; }
.verdict.bad { background: #ffebe9; border-left: 4px solid #cf222e; }
.verdict.warn { background: #fff8c5; border-left: 4px solid #9a6700; }
.verdict ul { margin: 0.2em 0 0; padding-left: 1.2em; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(15em, 1fr)); gap: 0.8em; margin: 1em 0; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: 0.7em 0.9em; }
.card h3 { margin: 0 0 0.4em; font-size: 1.05em; }
.card h3 small { color: #57606a; font-weight: normal; }
.sw { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 0.4em; }
.card dl { margin: 0; }
.card dt { color: #57606a; font-size: 0.85em; }
.card dd { margin: 0 0 0.4em; }
.card dd b { font-size: 1.3em; }
.card dd span { color: #57606a; font-size: 0.9em; }
.card p { margin: 0.3em 0 0; font-size: 0.88em; color: #57606a; }
.legend { color: #57606a; font-size: 0.9em; }
.wide { overflow-x: auto; margin: 0.5em 0 1em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 0.92em; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { background: #f6f8fa; }
th:first-child, td:first-child, td.l { text-align: left; }
td.differs { background: #ffebe9; } td.kernel { background: #fff8c5; } .nw { white-space: nowrap; }
td.bad, .bad { color: #cf222e; }
tr.summary td { font-weight: 600; background: #f6f8fa; }
details { margin: 0.4em 0 1em; } summary { cursor: pointer; color: #0969da; }
` + chartCSS + `code { font-size: 0.9em; overflow-wrap: anywhere; }
ul.timing-notes { color: #9a6700; }
</style>
</head>
<body>
<main>
<h1>sealbench report</h1>
<p class="ran">{{.Ran}}</p>

<section id="summary">
<h2>Summary</h2>
<div class="verdict {{if .Summary.CountsMatch}}ok{{else if .Summary.DifferentWork}}bad{{else}}warn{{end}}"><strong>Counts:</strong> {{.Counts}}</div>
{{- if .AA}}
<div class="verdict {{if .AAOK}}ok{{else}}warn{{end}}"><strong>The protocol's own noise:</strong> {{.AA}}</div>
{{- end}}
{{- range .Machines}}
<div class="verdict warn"><strong>Machine:</strong> {{.}}</div>
{{- end}}
{{- if .Signatures}}
<div class="verdict {{if .SignaturesOK}}ok{{else}}warn{{end}}"><strong>Signed results:</strong> {{join .Signatures "; "}}</div>
{{- end}}
{{- if .Summary.Warnings}}
<div class="verdict warn"><strong>Before reading the timings:</strong>
<ul>
{{- range .Summary.Warnings}}
<li>{{.}}</li>
{{- end}}
</ul></div>
{{- end}}
<div class="cards">
{{- range .Cards}}
<div class="card"><h3><span class="sw" style="background:{{css .Colour}}"></span>{{.Name}}{{if .Baseline}} <small>baseline</small>{{end}}</h3>
<dl>
{{- range .Figures}}
<dt>{{.Name}}</dt><dd><b>{{.Value}}</b> <span>{{.Interval}}</span></dd>
{{- end}}
</dl>
{{- range .Shown}}
<p>{{.}}</p>
{{- end}}
</div>
{{- end}}
</div>
<p class="legend">{{.Legend}}</p>
</section>

<section id="counts">
<h2>1. Same work: exact counts</h2>
{{- if not .Differences}}
<p>{{if gt (len .Targets) 1}}Every count is equal across all targets in every cell, so the timings below compare the same work. Where the targets agree, a value is shown once.{{else}}Every count is equal across the samples of every cell.{{end}}</p>
{{- else}}
<p>Where the targets agree, a value is shown once; where they differ, each target's value is shown: <span class="bad">✗</span> different work (those cells' timings do not compare the same work), † FUSE requests that differ between kernels (the same work).</p>
{{- end}}
{{template "matrix" .CountMatrix}}
{{- if .Differences}}
<ul>
{{- $names := .TargetNames}}
{{- range .Differences}}
<li>{{.Cell}} {{title .Count}}: {{diff . $names}}{{if .Why}} <em>({{.Why}})</em>{{else}} <span class="bad">(different work)</span>{{end}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .Problems}}
<p>Failed samples (kept, never retried):</p>
<ul>
{{- range .Problems}}
<li>{{.Target}} {{.Cell}} round {{.Round}}: <span class="bad">{{.Status}}</span>: {{.Reason}}{{if .Detail}} ({{.Detail}}){{end}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .Unsupported}}
<p>Not supported by this backend (the target cannot run the cell's LayerFS side; not failures):</p>
<ul>
{{- range .Unsupported}}
<li>{{.Target}} {{.Cell}} round {{.Round}}: not supported by this backend: {{.Reason}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .OpChart}}
<h3>FUSE requests by opcode</h3>
<figure>
{{.OpChart}}
<figcaption>Each cell's FUSE requests, stacked by opcode (without FORGET and INTERRUPT, which the kernel sends on its own time); one bar where the targets agree, one per target where they differ.</figcaption>
</figure>
<details><summary>FUSE requests by opcode: table</summary>
{{template "matrix" .OpMatrix}}
</details>
{{- end}}
</section>

<section id="timings">
<h2>2. Timings</h2>
<p class="legend">{{.Legend}} In the charts, a bar is a median, its whisker the interval, and each dot one sample; a pale bar shows no difference, a red outline a suspect reference.</p>
{{- $base := .Baseline}}
{{- range .Sections}}
<h3>{{.Title}}</h3>
{{- if .Chart}}
<figure>
{{.Chart}}
<figcaption>{{.Title}}, per cell and target ({{.UnitText}}).</figcaption>
</figure>
{{- end}}
{{- if .RatioChart}}
<figure>
{{.RatioChart}}
<figcaption>Command time relative to {{$base}}, per cell: below the line faster, above it slower.</figcaption>
</figure>
{{- end}}
<details{{if not .Charted}} open{{end}}><summary>{{.Title}}: table ({{.UnitText}}; ratio to {{$base}})</summary>
<div class="wide"><table>
<tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{- $sus := .Suspect}}{{$from := .SummaryFrom}}
{{- range $i, $row := .Table}}
<tr{{if ge $i $from}} class="summary"{{end}}>{{range $j, $c := $row}}<td{{if index (index $sus $i) $j}} class="bad"{{end}}>{{$c}}</td>{{end}}</tr>
{{- end}}
</table></div>
</details>
{{- if .Notes}}
<ul class="timing-notes">
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- end}}
</section>

<section id="provenance">
<h2>3. Provenance</h2>
{{- range .Runs}}
<div class="wide"><table>
<tr><th>run</th><td class="l">{{.RunID}}</td></tr>
<tr><th>bundle</th><td class="l"><code>{{.BundleID}}</code></td></tr>
<tr><th>Sandbox image</th><td class="l"><code>{{short .ImageID}}</code></td></tr>
<tr><th>runner</th><td class="l"><code>{{short .RunnerSHA256}}</code></td></tr>
<tr><th>stand-in</th><td class="l"><code>{{short .StandinSHA256}}</code></td></tr>
<tr><th>Store, workers</th><td class="l">{{dash .StoreProfile}}, {{dashInt .ConstructionWorkers}}</td></tr>
<tr><th>samples, seed</th><td class="l">{{dashInt .SamplesPerCell}} per cell, seed {{.Seed}}</td></tr>
<tr><th>start – end</th><td class="l">{{when .Start}} – {{when .End}}</td></tr>
<tr><th>lock wait max, load 1m</th><td class="l">{{nsms .LockWaitMaxNs}} ms, {{load .Load1Min .Load1Max}}</td></tr>
{{- if .Tools}}
<tr><th>tools</th><td class="l">{{tools .Tools}}</td></tr>
{{- end}}
</table></div>
{{- end}}
<div class="wide"><table>
<tr><th>target</th>{{range .Targets}}<th>{{.Name}}</th>{{end}}</tr>
<tr><th>run</th>{{range .Targets}}<td>{{.RunID}}</td>{{end}}</tr>
<tr><th>engine</th>{{range .Targets}}<td>{{dash .Engine}}</td>{{end}}</tr>
<tr><th>kernel</th>{{range .Targets}}<td>{{.KernelText}}</td>{{end}}</tr>
<tr><th>CPUs</th>{{range .Targets}}<td>{{dashInt .CPUs}}</td>{{end}}</tr>
<tr><th>memory</th>{{range .Targets}}<td>{{.MemoryText}}</td>{{end}}</tr>
<tr><th>emulated</th>{{range .Targets}}<td>{{.Emulated}}</td>{{end}}</tr>
<tr><th>FUSE transport</th>{{range .Targets}}<td>{{.FUSETransportText}}</td>{{end}}</tr>
<tr><th>samples</th>{{range .Targets}}<td>{{.Samples}}</td>{{end}}</tr>
</table></div>
<h3>Hosts</h3>
<p>Each host with the pins its targets share.</p>
<div class="wide"><table>
<tr><th>host</th><th>targets</th><th>kernel</th><th>CPUs</th><th>memory</th><th>runner ran on</th><th>Engine transport</th></tr>
{{- range .Hosts}}
<tr><td class="l">{{if .Host}}<code>{{.Host}}</code>{{else}}{{.HostText}}{{end}}</td><td class="l">{{join .Targets ", "}}</td><td>{{dash .Kernel}}</td><td>{{dashInt .CPUs}}</td><td>{{.MemoryText}}</td><td class="l">{{.RunnerText}}</td><td>{{dash .Transport}}</td></tr>
{{- end}}
</table></div>
</section>
{{- if .Notes}}

<section id="notes">
<h2>Notes</h2>
<ul>
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
</section>
{{- end}}
</main>
</body>
</html>
`
