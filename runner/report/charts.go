package report

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Charts are inline SVG written here, coordinates rounded to a tenth of a
// pixel so the same report gives the same bytes. Each scales with its
// viewBox to the page's width (down to a phone's) and keeps its text
// readable there: a chart prints its values at one short width, and
// its full text (with the interval) in each bar's tooltip.

// palette colours targets in order: Okabe and Ito's eight colours, which
// readers with any common colour vision deficiency tell apart. opPalette
// colours FUSE opcodes (a real run's cells send about 20): Okabe-Ito's
// seven hues, then Paul Tol's muted scheme, then their light tints, so
// that neighbours in a stack never share a hue.
var (
	palette   = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}
	opPalette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
		"#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499",
		"#7FB8D8", "#F2CF7F", "#7FCEB9", "#E5BCD3"}
)

// The chart's geometry, in viewBox units.
const (
	svgWidth   = 420.0
	plotLeft   = 40.0  // cell labels to the left
	plotRight  = 330.0 // value labels to the right
	barH       = 11.0
	barGap     = 2.0
	groupGap   = 8.0
	legendRow  = 18.0
	legendItem = 94.0
	axisH      = 30.0
)

func f1(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', 1, 64) }

func esc(s string) string { return template.HTMLEscapeString(s) }

// point is one bar: a value with its interval.
type point struct {
	series       int // index into the chart's series, for the colour
	value        float64
	lo, hi       float64
	hasCI        bool
	faint        bool   // no difference shown: drawn pale
	suspect      bool   // drawn with a red outline, its label red
	label, title string // the short label beside it; the tooltip
	// samples are the values the bar is the median of, each drawn as a
	// dot on the bar, so that a bimodal cell shows as two clusters.
	samples []float64
}

type group struct {
	label  string
	points []point
}

// valueChart is a bar chart of values per cell and series, each bar with
// its interval as a whisker, on a log scale when the values span more
// than a factor of 30; bars start at ref (1 for ratios) when it is set.
type valueChart struct {
	series  []string // names, coloured by palette in order
	colours []string
	groups  []group
	ref     float64 // a reference line (and the bars' origin); 0 for none
	refName string
	unit    string // "ms", "x"
	caption string
}

// scale maps values to x.
type scale struct {
	log      bool
	min, max float64 // the domain
	// ratio marks a log scale of ratios centred on 1 (min is 1/max):
	// 0.5x and 2x stand as far from 1x on either side.
	ratio bool
}

func (s scale) x(v float64) float64 {
	var t float64
	if s.log {
		v = math.Max(v, s.min)
		t = (math.Log10(v) - math.Log10(s.min)) / (math.Log10(s.max) - math.Log10(s.min))
	} else {
		t = (v - s.min) / (s.max - s.min)
	}
	return plotLeft + (plotRight-plotLeft)*math.Min(math.Max(t, 0), 1)
}

// ticks are the scale's round values: 1, 2, 5 times a power of ten; for a
// ratio scale, 1 and the powers of two on either side (the bounds where
// the range is narrower).
func (s scale) ticks() []float64 {
	var out []float64
	if s.ratio {
		if s.max < 2 {
			return []float64{s.min, 1, s.max}
		}
		for e := -math.Log2(s.max); e <= math.Log2(s.max)+1e-9; e++ {
			out = append(out, math.Pow(2, math.Round(e)))
		}
		return out
	}
	if s.log {
		decades := math.Log10(s.max) - math.Log10(s.min)
		for d := math.Floor(math.Log10(s.min)); d <= math.Log10(s.max)+1e-9; d++ {
			for _, m := range []float64{1, 2, 5} {
				if m != 1 && decades > 2 { // 2 and 5 crowd the labels of three decades
					continue
				}
				if v := m * math.Pow(10, d); v >= s.min*(1-1e-9) && v <= s.max*(1+1e-9) {
					out = append(out, v)
				}
			}
		}
		return out
	}
	step := niceStep((s.max - s.min) / 5)
	for v := s.min; v <= s.max+step*1e-6; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if !(x > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// makeScale fits values: log when they span more than a factor of 30,
// else linear from zero to a round value.
func makeScale(values []float64) scale {
	lo, hi := math.Inf(1), 0.0
	for _, v := range values {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		return scale{min: 0, max: 1}
	}
	if hi/lo > 30 {
		return scale{log: true, min: math.Pow(10, math.Floor(math.Log10(lo))), max: math.Pow(10, math.Ceil(math.Log10(hi)))}
	}
	step := niceStep(hi / 5)
	return scale{min: 0, max: math.Ceil(hi/step-1e-9) * step}
}

// ratioScale fits ratios on a log scale centred on 1: as far out on
// either side as the farthest value, rounded up to 1.25, 1.5 or a power
// of two.
func ratioScale(values []float64) scale {
	k := 1.0
	for _, v := range values {
		if v > 0 {
			k = math.Max(k, math.Max(v, 1/v))
		}
	}
	for _, nice := range []float64{1.25, 1.5} {
		if k <= nice {
			return scale{log: true, ratio: true, min: 1 / nice, max: nice}
		}
	}
	m := math.Pow(2, math.Ceil(math.Log2(k)-1e-9))
	return scale{log: true, ratio: true, min: 1 / m, max: m}
}

// tickText writes a tick's value: "0.5", "20", "1000"; on a ratio scale
// with two significant digits and an x ("0.67x", "2x").
func (s scale) tickText(v float64) string {
	if s.ratio {
		return strconv.FormatFloat(v, 'g', 2, 64) + "x"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

type svgWriter struct{ b strings.Builder }

func (w *svgWriter) p(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

// legend draws swatches with names in rows that fit the width; it
// returns the height it took.
func (w *svgWriter) legend(names, colours []string, y float64) float64 {
	item := legendItem
	for _, n := range names {
		item = math.Max(item, 22+6.5*float64(len(n))) // swatch, gap, capitals at about 6.5 units a letter
	}
	perRow := max(int(math.Floor((svgWidth-plotLeft)/item)), 1)
	for i, n := range names {
		x := plotLeft + float64(i%perRow)*item
		ly := y + float64(i/perRow)*legendRow
		w.p(`<rect x="%s" y="%s" width="10" height="10" fill="%s"/><text x="%s" y="%s">%s</text>`+"\n", f1(x), f1(ly), colours[i], f1(x+14), f1(ly+9), esc(n))
	}
	return float64((len(names)+perRow-1)/perRow) * legendRow
}

// axis draws the grid and tick labels from top to bottom, and the unit.
func (w *svgWriter) axis(s scale, top, bottom float64, unit string) {
	for _, t := range s.ticks() {
		x := f1(s.x(t))
		w.p(`<line x1="%s" y1="%s" x2="%s" y2="%s" class="grid"/><text x="%s" y="%s" text-anchor="middle" class="tick">%s</text>`+"\n",
			x, f1(top), x, f1(bottom), x, f1(bottom+12), s.tickText(t))
	}
	scaleName := ""
	switch {
	case s.ratio:
		scaleName = ", log scale centred on 1x"
	case s.log:
		scaleName = ", log scale"
	}
	w.p(`<text x="%s" y="%s" text-anchor="end" class="tick">%s%s</text>`+"\n", f1(plotRight), f1(bottom+25), esc(unit), scaleName)
}

func (c valueChart) svg() template.HTML {
	var all []float64
	for _, g := range c.groups {
		for _, p := range g.points {
			all = append(all, p.value)
			all = append(all, p.samples...)
			if p.hasCI {
				all = append(all, p.lo, p.hi)
			}
		}
	}
	if c.ref > 0 {
		all = append(all, c.ref)
	}
	s := makeScale(all)
	origin := s.min
	if c.ref > 0 {
		s, origin = ratioScale(all), c.ref
	}
	var w svgWriter
	var body svgWriter
	top := 4.0
	top += body.legend(c.series, c.colours, top) + 4
	y := top
	for _, g := range c.groups {
		gh := float64(len(g.points))*(barH+barGap) - barGap
		body.p(`<text x="4" y="%s" class="cell">%s</text>`+"\n", f1(y+gh/2+4), esc(g.label))
		for _, p := range g.points {
			x0, x1 := s.x(origin), s.x(p.value)
			if x1 < x0 {
				x0, x1 = x1, x0
			}
			class := "bar"
			if p.faint {
				class += " faint"
			}
			if p.suspect {
				class += " suspect"
			}
			body.p(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s" class="%s"><title>%s</title></rect>`+"\n",
				f1(x0), f1(y), f1(math.Max(x1-x0, 1)), f1(barH), c.colours[p.series], class, esc(p.title))
			if p.hasCI {
				cy := f1(y + barH/2)
				lo, hi := f1(s.x(p.lo)), f1(s.x(p.hi))
				body.p(`<path d="M%s %sH%sM%s %sv6M%s %sv6" class="ci"/>`+"\n", lo, cy, hi, lo, f1(y+barH/2-3), hi, f1(y+barH/2-3))
			}
			for _, v := range p.samples {
				body.p(`<circle cx="%s" cy="%s" r="1.8" class="sample"/>`+"\n", f1(s.x(v)), f1(y+barH/2))
			}
			labelClass := "val"
			if p.suspect {
				labelClass += " bad"
			}
			body.p(`<text x="%s" y="%s" class="%s">%s</text>`+"\n", f1(plotRight+6), f1(y+barH-2), labelClass, esc(p.label))
			y += barH + barGap
		}
		y += groupGap - barGap
	}
	bottom := y
	height := bottom + axisH
	w.p(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %s %s" role="img" aria-label="%s">`+"\n", f1(svgWidth), f1(height), esc(c.caption))
	w.axis(s, top-2, bottom, c.unit)
	if c.ref > 0 {
		x := f1(s.x(c.ref))
		w.p(`<line x1="%s" y1="%s" x2="%s" y2="%s" class="ref"/>`+"\n", x, f1(top-2), x, f1(bottom))
	}
	w.b.WriteString(body.b.String())
	w.p("</svg>")
	return template.HTML(w.b.String())
}

// stackedChart draws counts by part (FUSE requests by opcode) as one
// stacked bar per cell, or one per target where the targets differ.
type stackedChart struct {
	parts   []string // the segments' names, in order
	groups  []stackGroup
	caption string
}

type stackGroup struct {
	label string
	bars  []stackBar
}

type stackBar struct {
	name   string // "" where the targets agree
	counts []int64
	total  string
}

func (c stackedChart) svg() template.HTML {
	var totals []float64
	for _, g := range c.groups {
		for _, b := range g.bars {
			var t int64
			for _, n := range b.counts {
				t += n
			}
			totals = append(totals, float64(t))
		}
	}
	hi := slices.Max(append(totals, 1))
	step := niceStep(hi / 5)
	s := scale{min: 0, max: math.Ceil(hi/step-1e-9) * step}
	colours := make([]string, len(c.parts))
	for i := range c.parts {
		colours[i] = opPalette[i%len(opPalette)]
	}
	var body svgWriter
	top := 4.0
	top += body.legend(c.parts, colours, top) + 4
	y := top
	for _, g := range c.groups {
		gh := float64(len(g.bars))*(barH+barGap) - barGap
		body.p(`<text x="4" y="%s" class="cell">%s</text>`+"\n", f1(y+gh/2+4), esc(g.label))
		for _, b := range g.bars {
			var acc int64
			for i, n := range b.counts {
				if n == 0 {
					continue
				}
				x0, x1 := s.x(float64(acc)), s.x(float64(acc+n))
				acc += n
				who := ""
				if b.name != "" {
					who = b.name + " "
				}
				body.p(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s" class="bar"><title>%s%s %s: %s</title></rect>`+"\n",
					f1(x0), f1(y), f1(math.Max(x1-x0, 0.5)), f1(barH), colours[i], esc(who), esc(g.label), esc(c.parts[i]), grouped(strconv.FormatInt(n, 10)))
			}
			label := b.total
			if b.name != "" {
				label = b.name + " " + label
			}
			body.p(`<text x="%s" y="%s" class="val">%s</text>`+"\n", f1(plotRight+6), f1(y+barH-2), esc(label))
			y += barH + barGap
		}
		y += groupGap - barGap
	}
	var w svgWriter
	w.p(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %s %s" role="img" aria-label="%s">`+"\n", f1(svgWidth), f1(y+axisH), esc(c.caption))
	w.axis(s, top-2, y, "requests")
	w.b.WriteString(body.b.String())
	w.p("</svg>")
	return template.HTML(w.b.String())
}
