package runner

import (
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/stats"
)

// aaSamples are n ok samples of cell on target whose A/A ratios
// (nativeRepeatNs over nativeNs) are ratios, taken in turn.
func aaSamples(target, cell string, n int, ratios ...float64) []manifests.Sample {
	var out []manifests.Sample
	for r := range n {
		s := orderedSample(target, cell, r, sideOrder(1, target, cell, r, threeSides), manifests.ProtocolVersion)
		native := int64(100e6)
		repeat := int64(float64(native) * ratios[r%len(ratios)])
		s.NativeNs, s.NativeRepeatNs = &native, &repeat
		out = append(out, s)
	}
	return out
}

// TestImpreciseCells: the precision rule extends a cell whose A/A interval
// on some target is wider than the band's width, on every target; it
// leaves a cell whose interval is narrow wherever its median lies, and a
// cell with too few samples to judge.
func TestImpreciseCells(t *testing.T) {
	targets := []string{"local", "docker"}
	var samples []manifests.Sample
	// C01: wide on docker (0.6 to 1.4), narrow on local.
	samples = append(samples, aaSamples("local", "C01", 6, 0.99, 1.01)...)
	samples = append(samples, aaSamples("docker", "C01", 6, 0.6, 1.4, 0.8, 1.2, 0.7, 1.3)...)
	// C02: narrow, but far from 1 on docker: an unstable reference that
	// more samples would only confirm. The rule does not look at it.
	samples = append(samples, aaSamples("local", "C02", 6, 1.0)...)
	samples = append(samples, aaSamples("docker", "C02", 6, 1.30, 1.32, 1.31)...)
	// C03: wide, but only four samples on local: too few to judge.
	samples = append(samples, aaSamples("local", "C03", 4, 0.5, 1.5)...)
	samples = append(samples, aaSamples("docker", "C03", 6, 0.5, 1.5)...)
	// C04: wide on local, where failed samples do not count.
	samples = append(samples, aaSamples("local", "C04", 6, 0.7, 1.3)...)
	samples = append(samples, aaSamples("docker", "C04", 6, 1.0)...)
	failed := aaSamples("docker", "C05", 6, 0.5, 1.5)
	for i := range failed {
		failed[i].Status = manifests.StatusFailed
	}
	samples = append(samples, failed...)
	samples = append(samples, aaSamples("local", "C05", 6, 0.5, 1.5)...)

	got := ImpreciseCells(samples, targets, 1)
	var cells []string
	for _, w := range got {
		cells = append(cells, w.Cell+"@"+w.Target)
		if w.Interval.High-w.Interval.Low <= manifests.AAPrecisionWidth || w.N != 6 {
			t.Errorf("%s: interval %+v over %d samples", w, w.Interval, w.N)
		}
	}
	if strings.Join(cells, " ") != "C01@docker C04@local" {
		t.Errorf("extended %v, want C01 (docker's interval) and C04 (local's)", cells)
	}
	if len(got) > 0 && !strings.Contains(got[0].String(), "C01 on docker: A/A interval [0.") {
		t.Errorf("the rule says %q", got[0])
	}
}

// TestPrecisionRoundsKeepTheProtocol: rounds the rule adds continue the
// balanced sequence, so that the run's samples, planned and added, pass
// CheckProtocol, and the pins accept them as the rule's.
func TestPrecisionRoundsKeepTheProtocol(t *testing.T) {
	planned := 6
	var samples []manifests.Sample
	for _, slot := range append(stats.Interleave([]string{"local"}, []string{"C01"}, planned, 1),
		stats.Extend([]string{"local"}, []string{"C01"}, planned, len(manifests.BalancedOrders), 1)...) {
		s := orderedSample(slot.Target, slot.Cell, slot.Round, sideOrder(1, slot.Target, slot.Cell, slot.Round, threeSides), manifests.ProtocolVersion)
		s.Precision = slot.Round >= planned
		samples = append(samples, s)
	}
	if err := CheckProtocol(samples); err != nil {
		t.Error(err)
	}
	pins := &manifests.RunPins{RunID: "r", Samples: planned, Native: true, Cells: []string{"C01"}, Targets: []manifests.TargetPins{{Name: "local"}}}
	for i := range samples {
		samples[i].RunID = "r"
	}
	if err := pins.CheckSamples(samples); err != nil {
		t.Error(err)
	}
	// A sample the plan did not have, not marked as the rule's, is not
	// the run's; nor is one the rule could not have added.
	samples[len(samples)-1].Precision = false
	if err := pins.CheckSamples(samples); err == nil || !strings.Contains(err.Error(), "the run took 6 sample(s) per cell") {
		t.Errorf("an unplanned round unmarked: %v", err)
	}
	samples[len(samples)-1].Precision, samples[len(samples)-1].Round = true, planned+manifests.PrecisionBlocks*len(manifests.BalancedOrders)
	if err := pins.CheckSamples(samples); err == nil || !strings.Contains(err.Error(), "the precision rule added") {
		t.Errorf("a round past the rule's: %v", err)
	}
}
