// Package stats holds the few statistics the runner and the report use:
// medians, geometric means, ratios to a baseline, seeded bootstrap
// confidence intervals of a median, of a paired ratio of medians and of a
// paired ratio of two such ratios, and the seeded random order in which a
// run interleaves its targets and cells.
//
// Everything random here is seeded and uses a generator whose output is
// defined by its algorithm (PCG-DXSM, with our own bounded draws and
// shuffle), so a seed gives the same order and the same intervals on every
// machine and every Go release.
package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// GeoMean returns the geometric mean of xs, or NaN when xs is empty or
// holds a value that is not positive.
func GeoMean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		if !(x > 0) || math.IsInf(x, 0) {
			return math.NaN()
		}
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(xs)))
}

// Ratio returns x/base, or NaN when base is not positive.
func Ratio(x, base float64) float64 {
	if !(base > 0) {
		return math.NaN()
	}
	return x / base
}

// DefaultResamples is how many bootstrap resamples an interval uses unless
// told otherwise.
const DefaultResamples = 10000

// Interval is a confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Contains reports whether x lies in the interval, ends included.
func (iv Interval) Contains(x float64) bool { return iv.Low <= x && x <= iv.High }

// BootstrapMedian returns the bootstrap percentile confidence interval, at
// level (0.95 for 95%), of median(xs): each resample draws values with
// replacement. It is deterministic given seed, from the same generator as
// BootstrapRatio.
func BootstrapMedian(xs []float64, level float64, resamples int, seed uint64) (Interval, error) {
	return bootstrap([][]float64{xs}, level, resamples, seed, func(c [][]float64) float64 {
		return medianInPlace(c[0])
	})
}

// BootstrapRatio returns the bootstrap percentile confidence interval, at
// level (0.95 for 95%), of median(xs)/median(base), where xs[i] and base[i]
// are paired (taken in the same round of an interleaved run, or in the same
// sample): each resample draws pairs with replacement. It is deterministic
// given seed.
func BootstrapRatio(xs, base []float64, level float64, resamples int, seed uint64) (Interval, error) {
	return bootstrap([][]float64{xs, base}, level, resamples, seed, OfRatio)
}

// BootstrapRatioOfRatios returns the bootstrap percentile confidence
// interval, at level, of
//
//	(median(xs)/median(xbase)) / (median(ys)/median(ybase))
//
// where the i-th values of all four are paired: xs[i] and xbase[i] were
// measured in one sample, ys[i] and ybase[i] in another of the same round
// (one target's LayerFS over native against another's). Each resample
// draws rounds with replacement. It is deterministic given seed.
func BootstrapRatioOfRatios(xs, xbase, ys, ybase []float64, level float64, resamples int, seed uint64) (Interval, error) {
	return bootstrap([][]float64{xs, xbase, ys, ybase}, level, resamples, seed, OfRatioOfRatios)
}

// MedianOfRatios is the median over rows of xs[i]/base[i]: a ratio paired
// within each row (one sample's two sides), so that what slows a whole
// sample (a noisy neighbour for a few seconds, the host's CPU) cancels
// out instead of landing in one side's median. NaN for no rows or a row
// whose base is not positive.
func MedianOfRatios(xs, base []float64) float64 {
	if len(xs) == 0 || len(xs) != len(base) {
		return math.NaN()
	}
	r := make([]float64, len(xs))
	for i := range xs {
		if r[i] = Ratio(xs[i], base[i]); math.IsNaN(r[i]) {
			return math.NaN()
		}
	}
	return medianInPlace(r)
}

// BootstrapPairedRatio returns the bootstrap percentile confidence
// interval, at level, of MedianOfRatios(xs, base): each resample draws
// rows (xs[i] with base[i]) with replacement. It is deterministic given
// seed.
func BootstrapPairedRatio(xs, base []float64, level float64, resamples int, seed uint64) (Interval, error) {
	return bootstrap([][]float64{xs, base}, level, resamples, seed, OfPairedRatio)
}

// BootstrapRatioOfPairedRatios returns the bootstrap percentile
// confidence interval, at level, of MedianOfRatios(xs, xbase) over
// MedianOfRatios(ys, ybase), the four columns' rows paired (a round of
// two targets): each resample draws rows with replacement.
func BootstrapRatioOfPairedRatios(xs, xbase, ys, ybase []float64, level float64, resamples int, seed uint64) (Interval, error) {
	return bootstrap([][]float64{xs, xbase, ys, ybase}, level, resamples, seed, OfRatioOfPairedRatios)
}

// Estimator computes one value from paired columns (cols[k][i] is the
// k-th value of row i). The columns are the bootstrap's scratch copies: it
// may sort each on its own.
type Estimator func(cols [][]float64) float64

// The estimators the bootstrap functions take: the median of one column,
// the ratio of two columns' medians, and the ratio of two such ratios
// (columns x, xbase, y, ybase); and, for two sides measured within one
// row, the median of the rows' own ratios and the ratio of two such
// medians. The paired ones read the columns before sorting anything.
var (
	OfMedian        Estimator = func(c [][]float64) float64 { return medianInPlace(c[0]) }
	OfRatio         Estimator = func(c [][]float64) float64 { return Ratio(medianInPlace(c[0]), medianInPlace(c[1])) }
	OfRatioOfRatios Estimator = func(c [][]float64) float64 {
		return Ratio(Ratio(medianInPlace(c[0]), medianInPlace(c[1])), Ratio(medianInPlace(c[2]), medianInPlace(c[3])))
	}
	OfPairedRatio         Estimator = func(c [][]float64) float64 { return MedianOfRatios(c[0], c[1]) }
	OfRatioOfPairedRatios Estimator = func(c [][]float64) float64 {
		return Ratio(MedianOfRatios(c[0], c[1]), MedianOfRatios(c[2], c[3]))
	}
)

// BootstrapOverStrata returns the bootstrap percentile confidence
// interval, at level, of combine over strata of est(stratum): a summary
// over cells (combine GeoMean or Median) of each cell's estimate. Each
// resample draws every stratum's rows with replacement from that stratum
// alone, so a cell never borrows another's values. A stratum needs two
// rows or more. It is deterministic given seed.
func BootstrapOverStrata(strata [][][]float64, est Estimator, combine func([]float64) float64, level float64, resamples int, seed uint64) (Interval, error) {
	if len(strata) == 0 {
		return Interval{}, errors.New("bootstrap: no strata")
	}
	estimates := make([]float64, len(strata))
	return bootstrapStrata(strata, level, resamples, seed, func(scratch [][][]float64) float64 {
		for s, cols := range scratch {
			estimates[s] = est(cols)
		}
		return combine(estimates)
	})
}

// BootstrapChange returns the bootstrap percentile confidence interval, at
// level, of est(after)/est(before), where after and before are two
// separate runs: each resample draws the rows of each with replacement,
// independently, since nothing pairs a row of one with a row of the other.
// It is deterministic given seed.
func BootstrapChange(after, before [][]float64, est Estimator, level float64, resamples int, seed uint64) (Interval, error) {
	return bootstrapStrata([][][]float64{after, before}, level, resamples, seed, func(scratch [][][]float64) float64 {
		return Ratio(est(scratch[0]), est(scratch[1]))
	})
}

// BootstrapChangeOverStrata returns the bootstrap percentile confidence
// interval, at level, of combine over cells of est(after[c])/est(before[c]):
// a summary over cells (combine GeoMean) of each cell's change between two
// separate runs. Each resample draws every cell's rows of each run with
// replacement, from that cell and run alone. It is deterministic given seed.
func BootstrapChangeOverStrata(after, before [][][]float64, est Estimator, combine func([]float64) float64, level float64, resamples int, seed uint64) (Interval, error) {
	if len(after) != len(before) || len(after) == 0 {
		return Interval{}, fmt.Errorf("bootstrap: %d cells after, %d before", len(after), len(before))
	}
	strata := make([][][]float64, 0, 2*len(after))
	for c := range after {
		strata = append(strata, after[c], before[c])
	}
	changes := make([]float64, len(after))
	return bootstrapStrata(strata, level, resamples, seed, func(scratch [][][]float64) float64 {
		for c := range changes {
			changes[c] = Ratio(est(scratch[2*c]), est(scratch[2*c+1]))
		}
		return combine(changes)
	})
}

// bootstrapStrata is the percentile bootstrap of stat, each resample
// drawing every stratum's rows with replacement from that stratum.
func bootstrapStrata(strata [][][]float64, level float64, resamples int, seed uint64, stat func([][][]float64) float64) (Interval, error) {
	for s, cols := range strata {
		if len(cols) == 0 {
			return Interval{}, fmt.Errorf("bootstrap: stratum %d has no columns", s)
		}
		n := len(cols[0])
		for _, c := range cols[1:] {
			if len(c) != n {
				return Interval{}, fmt.Errorf("bootstrap: %d values paired with %d", n, len(c))
			}
		}
		if n < 2 {
			return Interval{}, errors.New("bootstrap: needs at least two values (or pairs) in every stratum")
		}
	}
	if err := checkBootstrap(level, resamples); err != nil {
		return Interval{}, err
	}
	rng := newRand(seed)
	scratch := make([][][]float64, len(strata))
	for s, cols := range strata {
		scratch[s] = make([][]float64, len(cols))
		for k := range cols {
			scratch[s][k] = make([]float64, len(cols[0]))
		}
	}
	values := make([]float64, 0, resamples)
	for range resamples {
		for s, cols := range strata {
			n := len(cols[0])
			for i := range n {
				j := rng.intN(n)
				for k, c := range cols {
					scratch[s][k][i] = c[j]
				}
			}
		}
		if v := stat(scratch); !math.IsNaN(v) {
			values = append(values, v)
		}
	}
	return percentiles(values, level)
}

func checkBootstrap(level float64, resamples int) error {
	switch {
	case !(level > 0 && level < 1):
		return fmt.Errorf("bootstrap: level %v is not between 0 and 1", level)
	case resamples < 100:
		return fmt.Errorf("bootstrap: %d resamples are too few", resamples)
	}
	return nil
}

func percentiles(values []float64, level float64) (Interval, error) {
	if len(values) == 0 {
		return Interval{}, errors.New("bootstrap: no resample has a value: a median it divides by is never positive")
	}
	sort.Float64s(values)
	alpha := (1 - level) / 2
	return Interval{Low: quantile(values, alpha), High: quantile(values, 1-alpha)}, nil
}

// bootstrap is the percentile bootstrap of stat over the rows of cols
// (cols[k][i] is the k-th value of row i; a row's values are paired): each
// resample draws n rows with replacement into scratch columns that stat
// may reorder. Resamples whose stat is NaN are left out.
func bootstrap(cols [][]float64, level float64, resamples int, seed uint64, stat func([][]float64) float64) (Interval, error) {
	return bootstrapStrata([][][]float64{cols}, level, resamples, seed, func(scratch [][][]float64) float64 {
		return stat(scratch[0])
	})
}

// medianInPlace is Median on a slice it may sort.
func medianInPlace(s []float64) float64 {
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// quantile returns the q-quantile of sorted s by linear interpolation
// between closest ranks.
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(math.Floor(pos))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// Level is the confidence level of the intervals sealbench reports and
// the precision rule reads.
const Level = 0.95

// Slot is one timed execution in a run's order.
type Slot struct {
	Round  int    // 0..n-1
	Target string // a target name
	Cell   string // a cell name
}

// Interleave returns the order of a run with n samples of every target and
// cell: round by round, each round every (target, cell) pair once, in a
// seeded random order of its own. Keeping rounds whole keeps each round's
// samples of different targets close in time, so that they pair.
func Interleave(targets, cells []string, n int, seed uint64) []Slot {
	rng := newRand(seed)
	out := make([]Slot, 0, n*len(targets)*len(cells))
	for r := range n {
		round := make([]Slot, 0, len(targets)*len(cells))
		for _, t := range targets {
			for _, c := range cells {
				round = append(round, Slot{Round: r, Target: t, Cell: c})
			}
		}
		// Fisher-Yates, from the end.
		for i := len(round) - 1; i > 0; i-- {
			j := rng.intN(i + 1)
			round[i], round[j] = round[j], round[i]
		}
		out = append(out, round...)
	}
	return out
}

// Extend returns the order of rounds from, from+1, ..., from+n-1 of the
// given cells on every target, as Interleave orders a run: each round
// every (target, cell) pair once, in a seeded random order of its own,
// drawn apart from the run's own rounds'.
func Extend(targets, cells []string, from, n int, seed uint64) []Slot {
	out := Interleave(targets, cells, from+n, seed^0x9e3779b97f4a7c15)[from*len(targets)*len(cells):]
	return slices.Clip(out)
}

// pcg draws from PCG-DXSM, whose output is fixed by its definition.
type pcg struct{ src *rand.PCG }

func newRand(seed uint64) *pcg {
	return &pcg{src: rand.NewPCG(seed, 0x5ea1be4c5ea1be4c)}
}

// intN returns a uniform int in [0, n) by rejection, so the result
// depends only on the generator's outputs.
func (p *pcg) intN(n int) int {
	un := uint64(n)
	limit := math.MaxUint64 - math.MaxUint64%un
	for {
		v := p.src.Uint64()
		if v < limit {
			return int(v % un)
		}
	}
}
