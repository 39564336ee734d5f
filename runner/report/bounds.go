package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sealbench/sealbench/runner/stats"
)

// Bound is a range every cell's median of one timing must lie in, on every
// target: what `sealbench report --bounds` checks (make bench-protocol
// checks LayerFS over native and the A/A this way). Low and High are in
// the timing's unit as the report prints it: a ratio, or milliseconds.
type Bound struct {
	Metric    string
	Low, High float64
}

// ParseBound parses METRIC=LOW:HIGH ("layerfsOverNative=0.8:1.5").
func ParseBound(s string) (Bound, error) {
	metric, rng, ok := strings.Cut(s, "=")
	lo, hi, ok2 := strings.Cut(rng, ":")
	if !ok || !ok2 || metric == "" {
		return Bound{}, fmt.Errorf("%q is not METRIC=LOW:HIGH", s)
	}
	var b Bound
	var err1, err2 error
	b.Metric = metric
	b.Low, err1 = strconv.ParseFloat(lo, 64)
	b.High, err2 = strconv.ParseFloat(hi, 64)
	if err1 != nil || err2 != nil || !(b.Low <= b.High) {
		return Bound{}, fmt.Errorf("%q: LOW and HIGH are numbers, LOW no more than HIGH", s)
	}
	if !knownMetric(metric) {
		return Bound{}, fmt.Errorf("%q: no timing %q (the timings are %s)", s, metric, strings.Join(MetricNames(), ", "))
	}
	return b, nil
}

// MetricNames are the timings a report can have, in order.
func MetricNames() []string {
	names := make([]string, len(metrics))
	for i, m := range metrics {
		names[i] = m.name
	}
	return names
}

func knownMetric(name string) bool {
	for _, m := range metrics {
		if m.name == name {
			return true
		}
	}
	return false
}

// BoundCheck is one cell's median of one timing on one target, held
// against its Bound.
type BoundCheck struct {
	Bound
	Target string          `json:"target"`
	Cell   string          `json:"cell"`
	N      int             `json:"n"`
	Median float64         `json:"median"` // in the bound's unit
	CI     *stats.Interval `json:"ci,omitempty"`
	Within bool            `json:"within"`
}

// CheckBounds holds every cell's median of each bound's timing, on every
// target, against the bound. A timing the report does not have (a run
// without a native reference has no LayerFS over native) is an error: a
// bound that checks nothing must not pass.
func (r *Report) CheckBounds(bounds []Bound) ([]BoundCheck, error) {
	var out []BoundCheck
	for _, b := range bounds {
		tm := r.timing(b.Metric)
		if tm == nil {
			return nil, inputErrorf("the results have no %s timing to check (a run without --native has no LayerFS over native and no A/A)", b.Metric)
		}
		scale := 1.0
		if tm.Unit == UnitNs {
			scale = 1e6 // bounds of durations are in milliseconds
		}
		for _, row := range tm.Rows {
			for i, v := range row.Values {
				if v.MedianNs == nil {
					continue
				}
				c := BoundCheck{Bound: b, Target: r.Targets[i].Name, Cell: row.Cell, N: v.N, Median: *v.MedianNs / scale}
				if v.MedianCI != nil {
					c.CI = &stats.Interval{Low: v.MedianCI.Low / scale, High: v.MedianCI.High / scale}
				}
				c.Within = c.Median >= b.Low && c.Median <= b.High
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// WriteBounds writes the checks as a table, a line per timing, cell and
// target, each value with its interval, and the verdict; it returns how
// many are outside.
func WriteBounds(w io.Writer, checks []BoundCheck) (outside int, err error) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "timing\tcell\ttarget\tmedian [interval]\tbounds\tverdict")
	for _, c := range checks {
		verdict := "within"
		if !c.Within {
			verdict, outside = "OUTSIDE", outside+1
		}
		median := num(c.Median)
		if !c.Within {
			median = strings.TrimSuffix(outsideTimes(c.Median, c.Low, c.High), "x")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Metric, c.Cell, c.Target, median+intervalText(c.CI, num),
			num(c.Low)+"-"+num(c.High), verdict)
	}
	if err := tw.Flush(); err != nil {
		return outside, err
	}
	_, err = fmt.Fprintf(w, "%d of %d medians outside their bounds\n", outside, len(checks))
	return outside, err
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
