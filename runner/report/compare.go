package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/stats"
)

// CompareKind names a comparison's JSON document.
const CompareKind = "sealbench.compare"

// CompareOptions tune Compare. The zero CompareOptions compare the same
// targets and cells, which both runs must then have.
type CompareOptions struct {
	// Pairs names which old target each new target is compared with;
	// empty: each target with the one of the same name, and both runs
	// must have the same targets.
	Pairs []TargetPair
	// Cells are the cells to compare, which both runs must have; empty:
	// every cell, and both runs must have the same cells.
	Cells []string
	// Seed seeds the bootstrap; by default the new run's seed.
	Seed uint64
	// Resamples is the bootstrap's resample count; by default
	// stats.DefaultResamples.
	Resamples int
}

// TargetPair is an old target and the new one compared with it.
type TargetPair struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// String writes "local" for a target compared with itself, "local → lima"
// otherwise.
func (p TargetPair) String() string {
	if p.Old == p.New {
		return p.Old
	}
	return p.Old + " → " + p.New
}

// ParseTargetPair reads "OLD=NEW" (or "NAME" for a target compared with
// itself).
func ParseTargetPair(s string) (TargetPair, error) {
	o, n, ok := strings.Cut(s, "=")
	if !ok {
		n = o
	}
	if o == "" || n == "" || strings.ContainsAny(o+n, "=, ") {
		return TargetPair{}, fmt.Errorf("target pair %q: want OLD=NEW, e.g. local=local or docker=lima", s)
	}
	return TargetPair{Old: o, New: n}, nil
}

// Comparison is two runs side by side, old against new: per cell and
// target pair, the old and new medians and the change between them with
// its interval.
type Comparison struct {
	FormatVersion int          `json:"formatVersion"`
	Kind          string       `json:"kind"`
	Old           CompareSide  `json:"old"`
	New           CompareSide  `json:"new"`
	Pairs         []TargetPair `json:"pairs"`
	Cells         []string     `json:"cells"`
	Level         float64      `json:"level"`
	Seed          uint64       `json:"seed"`
	// Warnings say where a pair's targets differ beyond the code measured
	// (CPUs, memory, kernel, emulation, transports), and where the bundles
	// differ.
	Warnings []string        `json:"warnings"`
	Metrics  []CompareMetric `json:"metrics"`
}

// CompareSide is what one side's report knows of its runs and targets.
type CompareSide struct {
	Source  string       `json:"source"`
	Bundles []string     `json:"bundles"`
	Runs    []RunInfo    `json:"runs"`
	Targets []TargetInfo `json:"targets"`
}

// CompareMetric is one timing compared, per cell and pair.
type CompareMetric struct {
	Metric string       `json:"metric"`
	Title  string       `json:"title"`
	Unit   string       `json:"unit"`
	Rows   []CompareRow `json:"rows"`
	// GeoMean is, per pair, the geometric mean over cells of new over
	// old, over the cells where both have a value.
	GeoMean []Summary `json:"geoMean"`
}

// CompareRow is one cell of one pair: old and new values and the change.
type CompareRow struct {
	Cell string      `json:"cell"`
	Pair TargetPair  `json:"pair"`
	Old  TimingValue `json:"old"` // MedianNs and MedianCI as the report has them
	New  TimingValue `json:"new"`
	// Change is new over old; absent when either has no value.
	Change *float64 `json:"change,omitempty"`
	// ChangeCI is the bootstrap interval of Change, each run resampled on
	// its own (nothing pairs an old sample with a new one); with two
	// samples or more on each side.
	ChangeCI *stats.Interval `json:"changeCi,omitempty"`
	// NoChange is whether ChangeCI includes 1.0: no difference shown.
	NoChange *bool `json:"noChange,omitempty"`
}

// Compare compares two runs (each one or more inputs of one bundle, as
// Build takes them). It refuses runs whose targets or cells differ
// unless opt names the pairs and cells to compare.
func Compare(old, new []Input, opt CompareOptions) (*Comparison, error) {
	resamples := opt.Resamples
	if resamples == 0 {
		resamples = stats.DefaultResamples
	}
	side := func(name string, in []Input) (*Report, error) {
		r, err := Build(in, Options{Seed: opt.Seed, Resamples: resamples})
		if err != nil {
			return nil, fmt.Errorf("the %s run: %w", name, err)
		}
		return r, nil
	}
	ro, err := side("old", old)
	if err != nil {
		return nil, err
	}
	rn, err := side("new", new)
	if err != nil {
		return nil, err
	}
	c := &Comparison{FormatVersion: FormatVersion, Kind: CompareKind, Level: Level, Seed: rn.Seed,
		Old: compareSide(old, ro), New: compareSide(new, rn), Warnings: []string{}}
	if c.Pairs, err = matchTargets(ro.TargetNames(), rn.TargetNames(), opt.Pairs); err != nil {
		return nil, err
	}
	if c.Cells, err = matchCells(cellNames(ro), cellNames(rn), opt.Cells); err != nil {
		return nil, err
	}
	c.warn(ro, rn)
	oldIdx, newIdx := indexSamples(old), indexSamples(new)
	for _, m := range metrics {
		to, tn := ro.timing(m.name), rn.timing(m.name)
		if to == nil || tn == nil {
			continue
		}
		cm := CompareMetric{Metric: m.name, Title: m.title, Unit: m.unit}
		for _, p := range c.Pairs {
			oi, ni := slices.Index(ro.TargetNames(), p.Old), slices.Index(rn.TargetNames(), p.New)
			var changes []float64
			var afters, befores [][][]float64
			short := false // a cell without an interval leaves the mean without one
			for _, cell := range c.Cells {
				row := CompareRow{Cell: cell, Pair: p, Old: valueOf(to, cell, oi), New: valueOf(tn, cell, ni)}
				if row.Old.MedianNs != nil && row.New.MedianNs != nil {
					if ch := stats.Ratio(*row.New.MedianNs, *row.Old.MedianNs); !math.IsNaN(ch) && ch > 0 {
						row.Change = &ch
						changes = append(changes, ch)
					}
				}
				if row.Change != nil {
					before, after := m.observe(oldIdx[p.Old][cell]), m.observe(newIdx[p.New][cell])
					if len(before) >= 2 && len(after) >= 2 {
						afters, befores = append(afters, m.columns(after)), append(befores, m.columns(before))
						if iv, err := stats.BootstrapChange(m.columns(after), m.columns(before), m.estimator(), Level, resamples, c.Seed); err == nil {
							row.ChangeCI, row.NoChange = &iv, boolPtr(iv.Contains(1))
						}
					} else {
						short = true
					}
				}
				cm.Rows = append(cm.Rows, row)
			}
			g := summarize(changes, 0, stats.GeoMean)
			if g.Value != nil && !short {
				if iv, err := stats.BootstrapChangeOverStrata(afters, befores, m.estimator(), stats.GeoMean, Level, resamples, c.Seed); err == nil {
					g.CI, g.NoDifference = &iv, boolPtr(iv.Contains(1))
				}
			}
			cm.GeoMean = append(cm.GeoMean, g)
		}
		c.Metrics = append(c.Metrics, cm)
	}
	return c, nil
}

func compareSide(in []Input, r *Report) CompareSide {
	var sources []string
	for _, i := range in {
		sources = append(sources, i.Source)
	}
	return CompareSide{Source: strings.Join(sources, ", "), Bundles: r.Summary.Bundles, Runs: r.Runs, Targets: r.Targets}
}

func cellNames(r *Report) []string {
	var names []string
	for _, c := range r.Cells {
		names = append(names, c.Name)
	}
	return names
}

// valueOf is target i's value of one cell in tm; the zero value when the
// cell is not there.
func valueOf(tm *Timing, cell string, i int) TimingValue {
	for _, row := range tm.Rows {
		if row.Cell == cell {
			return row.Values[i]
		}
	}
	return TimingValue{}
}

// indexSamples indexes inputs' samples by target and cell, by round.
func indexSamples(inputs []Input) map[string]map[string][]*manifests.Sample {
	idx := map[string]map[string][]*manifests.Sample{}
	for _, in := range inputs {
		for i := range in.Samples {
			s := &in.Samples[i]
			if idx[s.Target] == nil {
				idx[s.Target] = map[string][]*manifests.Sample{}
			}
			idx[s.Target][s.Cell] = append(idx[s.Target][s.Cell], s)
		}
	}
	for _, byCell := range idx {
		for _, ss := range byCell {
			sort.SliceStable(ss, func(i, j int) bool { return ss[i].Round < ss[j].Round })
		}
	}
	return idx
}

// matchTargets pairs the targets: those pairs given, each naming an old
// and a new target, or else every target with itself, when both runs
// have the same ones.
func matchTargets(old, new []string, given []TargetPair) ([]TargetPair, error) {
	if len(given) == 0 {
		if !sameSet(old, new) {
			return nil, inputErrorf("the runs' targets differ (old: %s; new: %s): name the pairs to compare, e.g. --match %s=%s",
				strings.Join(old, ", "), strings.Join(new, ", "), old[0], new[0])
		}
		var pairs []TargetPair
		for _, t := range new {
			pairs = append(pairs, TargetPair{Old: t, New: t})
		}
		return pairs, nil
	}
	for _, p := range given {
		switch {
		case !slices.Contains(old, p.Old):
			return nil, inputErrorf("target pair %s: the old run has no target %q (it has %s)", p, p.Old, strings.Join(old, ", "))
		case !slices.Contains(new, p.New):
			return nil, inputErrorf("target pair %s: the new run has no target %q (it has %s)", p, p.New, strings.Join(new, ", "))
		}
	}
	return given, nil
}

// matchCells are the cells to compare: those given, which both runs must
// have, or every cell, when both runs have the same ones.
func matchCells(old, new, given []string) ([]string, error) {
	if len(given) == 0 {
		if !sameSet(old, new) {
			var onlyOld, onlyNew []string
			for _, c := range old {
				if !slices.Contains(new, c) {
					onlyOld = append(onlyOld, c)
				}
			}
			for _, c := range new {
				if !slices.Contains(old, c) {
					onlyNew = append(onlyNew, c)
				}
			}
			return nil, inputErrorf("the runs' cells differ (only in the old run: %s; only in the new: %s): name the cells to compare, e.g. --cells %s",
				dash(strings.Join(onlyOld, ", ")), dash(strings.Join(onlyNew, ", ")), strings.Join(common(old, new), ","))
		}
		return new, nil
	}
	for _, c := range given {
		if !slices.Contains(old, c) || !slices.Contains(new, c) {
			return nil, inputErrorf("cell %s is not in both runs (old: %s; new: %s)", c, strings.Join(old, ", "), strings.Join(new, ", "))
		}
	}
	return given, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func common(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// warn notes what differs between the runs beyond the code measured.
func (c *Comparison) warn(ro, rn *Report) {
	if !slices.Equal(c.Old.Bundles, c.New.Bundles) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("Different bundles (old %s, new %s): the code measured differs, which may be the point of the comparison.",
			strings.Join(c.Old.Bundles, ", "), strings.Join(c.New.Bundles, ", ")))
	}
	for _, p := range c.Pairs {
		o, n := ro.Targets[slices.Index(ro.TargetNames(), p.Old)], rn.Targets[slices.Index(rn.TargetNames(), p.New)]
		var diffs []string
		differ := func(what, a, b string) {
			if a != "" && b != "" && a != b {
				diffs = append(diffs, what+" "+a+" → "+b)
			}
		}
		for _, tr := range targetTraits {
			if tr.when == nil || tr.when([]TargetInfo{o, n}) {
				differ(tr.name, tr.of(o), tr.of(n))
			}
		}
		if len(diffs) > 0 {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %s: a change includes these, not only the code.", p, strings.Join(diffs, ", ")))
		}
	}
}

// pct writes a change (new over old) as a percentage: "+4.2%", "−3.1%".
func pct(ratio float64) string {
	v := (ratio - 1) * 100
	sign := "+"
	if v < 0 {
		sign, v = "−", -v
	}
	prec := 1
	if v >= 100 {
		prec = 0
	}
	return sign + strconv.FormatFloat(v, 'f', prec, 64) + "%"
}

// ChangeText writes a row's change with its interval: "+4.2% [+1.0%,
// +7.5%]", or with "~" where the interval includes no change; a dash
// without a change.
func (row CompareRow) ChangeText() string {
	if row.Change == nil {
		return "—"
	}
	return pct(*row.Change) + intervalText(row.ChangeCI, pct) + marks(row.NoChange, "")
}
