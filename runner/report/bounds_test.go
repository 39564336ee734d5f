package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestParseBound(t *testing.T) {
	b, err := ParseBound("layerfsOverNative=0.8:1.5")
	if err != nil || b != (Bound{Metric: "layerfsOverNative", Low: 0.8, High: 1.5}) {
		t.Errorf("ParseBound = %+v, %v", b, err)
	}
	for _, bad := range []string{"", "layerfsOverNative", "layerfsOverNative=0.8", "=0.8:1.5", "layerfsOverNative=a:1", "layerfsOverNative=2:1", "fastness=0.8:1.5"} {
		if b, err := ParseBound(bad); err == nil {
			t.Errorf("ParseBound(%q) = %+v, want an error", bad, b)
		}
	}
}

// On the fixed run: docker's C06 A/A (1.30) and local's C07 LayerFS over
// native (0.22) are outside the bounds make bench-protocol sets; the other
// large-file cells are within.
func TestCheckBounds(t *testing.T) {
	r, _ := fixtureReport(t)
	checks, err := r.CheckBounds([]Bound{{Metric: "layerfsOverNative", Low: 0.8, High: 1.5}, {Metric: aaMetric.name, Low: 0.9, High: 1.1}})
	if err != nil {
		t.Fatal(err)
	}
	var outside []string
	for _, c := range checks {
		if !c.Within && (c.Cell == "C06" || c.Cell == "C07" || c.Cell == "C08") {
			outside = append(outside, c.Metric+" "+c.Target+" "+c.Cell)
		}
	}
	if got := strings.Join(outside, ", "); got != "layerfsOverNative local C07, nativeRepeatOverNative docker C06" {
		t.Errorf("outside in C06-C08: %s", got)
	}
	var b bytes.Buffer
	n, err := WriteBounds(&b, checks)
	if err != nil || n == 0 || !strings.Contains(b.String(), "nativeRepeatOverNative  C06   docker  1.30 [1.30, 1.30]") || !strings.Contains(b.String(), "OUTSIDE") {
		t.Errorf("WriteBounds: %d outside, %v\n%s", n, err, b.String())
	}
	if _, err := (&Report{}).CheckBounds([]Bound{{Metric: "layerfsOverNative", Low: 0.8, High: 1.5}}); err == nil {
		t.Error("a bound on a timing the results lack passed")
	}
}

// A ratio just outside a range is never written as if inside it.
func TestOutsideTimes(t *testing.T) {
	for _, tc := range []struct {
		v, lo, hi float64
		want      string
	}{
		{1.1037, 0.9, 1.1, "1.104x"},
		{0.8951, 0.9, 1.1, "0.895x"},
		{1.31, 0.9, 1.1, "1.31x"},
		{0.6651, 0.67, math.Inf(1), "0.665x"},
	} {
		if got := outsideTimes(tc.v, tc.lo, tc.hi); got != tc.want {
			t.Errorf("outsideTimes(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
