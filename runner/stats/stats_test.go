package stats

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
		{[]float64{5, 5, 1, 9, 5}, 5},
	} {
		in := fmt.Sprint(tt.in)
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if fmt.Sprint(tt.in) != in {
			t.Errorf("Median changed its input to %v", tt.in)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestGeoMeanAndRatio(t *testing.T) {
	if got := GeoMean([]float64{1, 4, 16}); !near(got, 4) {
		t.Errorf("GeoMean(1,4,16) = %v, want 4", got)
	}
	if got := GeoMean([]float64{0.5, 2}); !near(got, 1) {
		t.Errorf("GeoMean(0.5,2) = %v, want 1", got)
	}
	for _, bad := range [][]float64{nil, {1, 0}, {1, -2}, {math.NaN()}} {
		if !math.IsNaN(GeoMean(bad)) {
			t.Errorf("GeoMean(%v) is not NaN", bad)
		}
	}
	if Ratio(3, 2) != 1.5 || !math.IsNaN(Ratio(1, 0)) {
		t.Error("Ratio")
	}
}

func TestBootstrapRatio(t *testing.T) {
	// Every pair in exactly the ratio 2: every resample's ratio is 2.
	base := []float64{10, 12, 11, 13, 9}
	xs := []float64{20, 24, 22, 26, 18}
	iv, err := BootstrapRatio(xs, base, 0.95, 2000, 1)
	if err != nil || !near(iv.Low, 2) || !near(iv.High, 2) {
		t.Errorf("constant ratio: %+v, %v", iv, err)
	}

	xs = []float64{21, 23, 25, 24, 19, 22, 30}
	base = []float64{10, 12, 11, 13, 9, 10, 12}
	a, err := BootstrapRatio(xs, base, 0.95, DefaultResamples, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := BootstrapRatio(xs, base, 0.95, DefaultResamples, 42)
	if a != b {
		t.Errorf("same seed, different intervals: %+v, %+v", a, b)
	}
	point := Median(xs) / Median(base)
	if !(a.Low <= point && point <= a.High && a.Low < a.High) {
		t.Errorf("interval %+v does not hold the point estimate %v", a, point)
	}
	// Pinned, so that a change to the generator or the method shows.
	if got := fmt.Sprintf("%.6f %.6f", a.Low, a.High); got != pinnedInterval {
		t.Errorf("interval = %s, want %s", got, pinnedInterval)
	}
	narrow, _ := BootstrapRatio(xs, base, 0.5, DefaultResamples, 42)
	if !(narrow.Low >= a.Low && narrow.High <= a.High) {
		t.Errorf("50%% interval %+v is not inside the 95%% one %+v", narrow, a)
	}

	for _, bad := range []struct {
		xs, base []float64
		level    float64
		n        int
	}{
		{[]float64{1, 2}, []float64{1}, 0.95, 1000},
		{[]float64{1}, []float64{1}, 0.95, 1000},
		{[]float64{1, 2}, []float64{1, 2}, 1, 1000},
		{[]float64{1, 2}, []float64{1, 2}, 0.95, 10},
		{[]float64{1, 2}, []float64{0, 0}, 0.95, 1000},
	} {
		if _, err := BootstrapRatio(bad.xs, bad.base, bad.level, bad.n, 1); err == nil {
			t.Errorf("BootstrapRatio(%v, %v, %v, %d) accepted it", bad.xs, bad.base, bad.level, bad.n)
		}
	}
}

const pinnedInterval = "1.916667 2.272727"

// spread returns n values around 100 from a fixed sequence (a
// deterministic stand-in for noisy timings): mean 100, steps of ±10%.
func spread(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = 100 + float64((i*37)%21-10)
	}
	return xs
}

func TestBootstrapMedian(t *testing.T) {
	xs := []float64{275, 262.1, 290.4, 281, 268, 300, 259}
	a, err := BootstrapMedian(xs, 0.95, DefaultResamples, 7)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := BootstrapMedian(xs, 0.95, DefaultResamples, 7); a != b {
		t.Errorf("same seed, different intervals: %+v, %+v", a, b)
	}
	if m := Median(xs); !(a.Contains(m) && a.Low < m && m < a.High) {
		t.Errorf("interval %+v does not hold the median %v inside it", a, m)
	}
	if a.Low < 259 || a.High > 300 {
		t.Errorf("interval %+v reaches outside the values", a)
	}
	// Pinned, so that a change to the generator or the method shows.
	if got := fmt.Sprintf("%.6f %.6f", a.Low, a.High); got != pinnedMedianInterval {
		t.Errorf("interval = %s, want %s", got, pinnedMedianInterval)
	}

	// More samples from the same spread: a narrower interval.
	small, err := BootstrapMedian(spread(5), 0.95, DefaultResamples, 1)
	if err != nil {
		t.Fatal(err)
	}
	large, err := BootstrapMedian(spread(60), 0.95, DefaultResamples, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !(large.High-large.Low < (small.High-small.Low)/2) {
		t.Errorf("60 samples give %+v, 5 give %+v: the interval does not narrow", large, small)
	}
	if !large.Contains(100) {
		t.Errorf("60 samples around 100 give %+v", large)
	}

	// Equal values: a point.
	if iv, err := BootstrapMedian([]float64{4, 4, 4}, 0.95, 1000, 1); err != nil || iv != (Interval{4, 4}) {
		t.Errorf("constant values: %+v, %v", iv, err)
	}
	for _, bad := range []struct {
		xs    []float64
		level float64
		n     int
	}{
		{[]float64{1}, 0.95, 1000},
		{nil, 0.95, 1000},
		{[]float64{1, 2}, 0, 1000},
		{[]float64{1, 2}, 0.95, 99},
	} {
		if _, err := BootstrapMedian(bad.xs, bad.level, bad.n, 1); err == nil {
			t.Errorf("BootstrapMedian(%v, %v, %d) accepted it", bad.xs, bad.level, bad.n)
		}
	}
	in := fmt.Sprint(xs)
	if _, err := BootstrapMedian(xs, 0.95, 1000, 1); err != nil || fmt.Sprint(xs) != in {
		t.Errorf("BootstrapMedian changed its input to %v (%v)", xs, err)
	}
}

const pinnedMedianInterval = "262.100000 290.400000"

// TestBootstrapRatioOfRatios: one target's LayerFS over native against
// another's, resampled by round.
func TestBootstrapRatioOfRatios(t *testing.T) {
	// Each round: x = 2*xbase exactly, y = 4*ybase exactly: the ratio of
	// ratios is 0.5 in every resample, whatever the noise of the bases.
	xbase := []float64{10, 13, 9, 11, 12}
	ybase := []float64{30, 20, 25, 28, 22}
	xs, ys := make([]float64, 5), make([]float64, 5)
	for i := range xs {
		xs[i], ys[i] = 2*xbase[i], 4*ybase[i]
	}
	iv, err := BootstrapRatioOfRatios(xs, xbase, ys, ybase, 0.95, 2000, 3)
	if err != nil || !near(iv.Low, 0.5) || !near(iv.High, 0.5) {
		t.Errorf("constant ratios: %+v, %v", iv, err)
	}

	// Noisy: the interval holds the point estimate and is deterministic.
	xs = []float64{21, 25, 19, 22, 24, 20}
	xbase = []float64{10, 11, 10, 12, 11, 9}
	ys = []float64{40, 44, 38, 47, 41, 43}
	ybase = []float64{21, 20, 19, 22, 23, 20}
	a, err := BootstrapRatioOfRatios(xs, xbase, ys, ybase, 0.95, DefaultResamples, 42)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := BootstrapRatioOfRatios(xs, xbase, ys, ybase, 0.95, DefaultResamples, 42); a != b {
		t.Errorf("same seed, different intervals: %+v, %+v", a, b)
	}
	point := (Median(xs) / Median(xbase)) / (Median(ys) / Median(ybase))
	if !(a.Contains(point) && a.Low < a.High) {
		t.Errorf("interval %+v does not hold the point estimate %v", a, point)
	}
	for _, bad := range [][4][]float64{
		{{1, 2}, {1, 2}, {1, 2}, {1}},
		{{1}, {1}, {1}, {1}},
		{{1, 2}, {0, 0}, {1, 2}, {1, 2}},
	} {
		if _, err := BootstrapRatioOfRatios(bad[0], bad[1], bad[2], bad[3], 0.95, 1000, 1); err == nil {
			t.Errorf("BootstrapRatioOfRatios(%v) accepted it", bad)
		}
	}
}

func TestIntervalContains(t *testing.T) {
	iv := Interval{Low: 0.97, High: 1.12}
	if !iv.Contains(1) || !iv.Contains(0.97) || !iv.Contains(1.12) || iv.Contains(0.96) || iv.Contains(1.13) {
		t.Errorf("Contains is wrong for %+v", iv)
	}
}

func TestInterleave(t *testing.T) {
	targets := []string{"local", "docker"}
	cells := []string{"C01", "C02", "C03"}
	order := Interleave(targets, cells, 3, 7)
	if len(order) != 18 {
		t.Fatalf("%d slots, want 18", len(order))
	}
	for r := range 3 {
		seen := map[string]bool{}
		for _, s := range order[r*6 : r*6+6] {
			if s.Round != r {
				t.Errorf("slot %+v in round %d", s, r)
			}
			seen[s.Target+"/"+s.Cell] = true
		}
		if len(seen) != 6 {
			t.Errorf("round %d has %d distinct pairs, want 6", r, len(seen))
		}
	}
	var got []string
	for _, s := range order[:6] {
		got = append(got, s.Target+"/"+s.Cell)
	}
	if strings.Join(got, " ") != pinnedOrder {
		t.Errorf("round 0 = %s, want %s", strings.Join(got, " "), pinnedOrder)
	}
	if fmt.Sprint(Interleave(targets, cells, 3, 7)) != fmt.Sprint(order) {
		t.Error("same seed, different order")
	}
	if fmt.Sprint(Interleave(targets, cells, 3, 8)) == fmt.Sprint(order) {
		t.Error("another seed gave the same order")
	}
}

const pinnedOrder = "docker/C03 local/C03 docker/C02 local/C02 docker/C01 local/C01"

// TestBootstrapOverStrata: a summary over cells draws each cell's rows
// from that cell alone, so cells whose values never vary give an interval
// of exactly their summary, and a cell with one row is refused.
// TestExtend: the precision rule's rounds continue the run's numbering,
// each round every (target, cell) pair of the cells extended once, in an
// order the seed fixes.
func TestExtend(t *testing.T) {
	targets := []string{"local", "docker"}
	more := Extend(targets, []string{"C01", "C12"}, 6, 6, 7)
	if len(more) != 24 {
		t.Fatalf("%d slots, want 24", len(more))
	}
	for i, s := range more {
		if want := 6 + i/4; s.Round != want {
			t.Errorf("slot %d %+v: round %d, want %d", i, s, s.Round, want)
		}
		if s.Cell != "C01" && s.Cell != "C12" {
			t.Errorf("slot %d extends %s, which was not asked for", i, s.Cell)
		}
	}
	for r := range 6 {
		seen := map[string]bool{}
		for _, s := range more[r*4 : r*4+4] {
			seen[s.Target+"/"+s.Cell] = true
		}
		if len(seen) != 4 {
			t.Errorf("round %d has %d distinct pairs, want 4", 6+r, len(seen))
		}
	}
	if fmt.Sprint(Extend(targets, []string{"C01", "C12"}, 6, 6, 7)) != fmt.Sprint(more) {
		t.Error("same seed, different order")
	}
}

func TestBootstrapOverStrata(t *testing.T) {
	constant := [][][]float64{
		{{2, 2, 2}, {1, 1, 1}}, // ratio 2
		{{9, 9}, {1, 1}},       // ratio 9
		{{4, 4, 4, 4}, {2, 2, 2, 2}},
	}
	iv, err := BootstrapOverStrata(constant, OfRatio, GeoMean, 0.95, 1000, 1)
	if want := GeoMean([]float64{2, 9, 2}); err != nil || math.Abs(iv.Low-want) > 1e-12 || math.Abs(iv.High-want) > 1e-12 {
		t.Errorf("constant cells: %+v, %v; want exactly %v", iv, err, want)
	}
	varied := [][][]float64{
		{{10, 11, 12, 13, 30}},
		{{100, 90, 95, 120, 101}},
	}
	a, err := BootstrapOverStrata(varied, OfMedian, Median, 0.95, 2000, 3)
	b, _ := BootstrapOverStrata(varied, OfMedian, Median, 0.95, 2000, 3)
	point := Median([]float64{Median(varied[0][0]), Median(varied[1][0])})
	if err != nil || a != b || !a.Contains(point) || a.Low == a.High {
		t.Errorf("varied cells: %+v (again %+v), %v; want a seeded interval around %v", a, b, err, point)
	}
	if _, err := BootstrapOverStrata([][][]float64{{{1, 2}}, {{3}}}, OfMedian, Median, 0.95, 1000, 1); err == nil {
		t.Error("a cell with one value gave an interval")
	}
}

// TestBootstrapChange: two runs resampled independently; the interval of
// after over before holds a real change away from 1 and holds 1 where the
// runs drew from the same values.
func TestBootstrapChange(t *testing.T) {
	before := [][]float64{{100, 104, 98, 101, 99, 103}}
	slower := [][]float64{{150, 156, 147, 151, 149, 154}}
	iv, err := BootstrapChange(slower, before, OfMedian, 0.95, 2000, 5)
	if err != nil || iv.Contains(1) || !iv.Contains(1.5) {
		t.Errorf("50%% slower: %+v, %v", iv, err)
	}
	same := [][]float64{{99, 103, 100, 104, 98, 101}}
	if iv, err := BootstrapChange(same, before, OfMedian, 0.95, 2000, 5); err != nil || !iv.Contains(1) {
		t.Errorf("the same values: %+v, %v; want an interval holding 1", iv, err)
	}
	// LayerFS over native, old run against new.
	if iv, err := BootstrapChange([][]float64{{20, 21, 19}, {10, 10, 10}}, [][]float64{{10, 11, 9}, {10, 10, 10}}, OfRatio, 0.95, 1000, 1); err != nil || iv.Contains(1) {
		t.Errorf("a ratio that doubled: %+v, %v", iv, err)
	}
}

// TestBootstrapChangeOverStrata: the geometric mean over cells of each
// cell's change, each run of each cell resampled on its own.
func TestBootstrapChangeOverStrata(t *testing.T) {
	before := [][][]float64{{{10, 11, 9, 10}}, {{100, 104, 98, 101}}}
	after := [][][]float64{{{20, 22, 18, 20}}, {{100, 103, 99, 102}}} // twice, then the same
	iv, err := BootstrapChangeOverStrata(after, before, OfMedian, GeoMean, 0.95, 2000, 9)
	if want := math.Sqrt(2); err != nil || !iv.Contains(want) || iv.Contains(1) {
		t.Errorf("%+v, %v; want an interval around %v that excludes 1", iv, err, want)
	}
	if _, err := BootstrapChangeOverStrata(after[:1], before, OfMedian, GeoMean, 0.95, 2000, 9); err == nil {
		t.Error("one cell after, two before: an interval")
	}
}

// A paired ratio takes each row's own ratio: a row slowed as a whole
// (both sides twice as slow) changes nothing, where the ratio of the
// columns' medians moves.
func TestMedianOfRatios(t *testing.T) {
	xs := []float64{10, 20, 11, 22, 10}
	base := []float64{10, 20, 10, 20, 10}
	if got := MedianOfRatios(xs, base); got != 1 {
		t.Errorf("MedianOfRatios = %v, want 1", got)
	}
	if got := Ratio(Median(xs), Median(base)); got == 1 {
		t.Errorf("the ratio of medians is %v too: the test shows nothing", got)
	}
	for _, bad := range [][2][]float64{{nil, nil}, {{1, 2}, {1}}, {{1}, {0}}} {
		if got := MedianOfRatios(bad[0], bad[1]); !math.IsNaN(got) {
			t.Errorf("MedianOfRatios(%v, %v) = %v, want NaN", bad[0], bad[1], got)
		}
	}
	// The bootstrap keeps rows together: every resample of rows whose
	// ratios are all 1 or 1.1 lies in [1, 1.1].
	iv, err := BootstrapPairedRatio(xs, base, 0.95, 1000, 3)
	if err != nil || iv.Low < 1 || iv.High > 1.1 {
		t.Errorf("BootstrapPairedRatio = %+v, %v; want within [1, 1.1]", iv, err)
	}
	again, _ := BootstrapPairedRatio(xs, base, 0.95, 1000, 3)
	if again != iv {
		t.Errorf("not deterministic: %+v, then %+v", iv, again)
	}
	ys, ybase := []float64{30, 60, 30, 60, 30}, []float64{10, 20, 10, 20, 10}
	if iv, err := BootstrapRatioOfPairedRatios(ys, ybase, xs, base, 0.95, 1000, 3); err != nil || !iv.Contains(3) && !iv.Contains(3/1.1) {
		t.Errorf("BootstrapRatioOfPairedRatios = %+v, %v; want about 3", iv, err)
	}
}
