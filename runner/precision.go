package runner

import (
	"fmt"
	"slices"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/stats"
)

// Imprecise is a cell the precision rule extends: on Target, its A/A
// interval over N samples is Interval, wider than
// manifests.AAPrecisionWidth.
type Imprecise struct {
	Cell, Target string
	N            int
	Interval     stats.Interval
}

func (w Imprecise) String() string {
	return fmt.Sprintf("%s on %s: A/A interval [%.2f, %.2f] over %d samples is wider than %.2f: another %d rounds on every target",
		w.Cell, w.Target, w.Interval.Low, w.Interval.High, w.N, manifests.AAPrecisionWidth, len(manifests.BalancedOrders))
}

// ImpreciseCells is the precision rule's verdict on the samples so far
// (protocol 4): each cell, in the samples' order, whose A/A interval on
// some target (the paired bootstrap's interval, at the report's level, of
// the median of nativeRepeatNs over nativeNs) is wider than
// manifests.AAPrecisionWidth, with the first such target's. A cell is
// judged only when every target has manifests.PrecisionMinSamples samples
// with both native times; the rule reads the interval's width, never where
// its median lies.
func ImpreciseCells(samples []manifests.Sample, targets []string, seed uint64) []Imprecise {
	type key struct{ cell, target string }
	repeat, native := map[key][]float64{}, map[key][]float64{}
	var order []string
	for _, s := range samples {
		if s.Status != manifests.StatusOK || s.NativeNs == nil || s.NativeRepeatNs == nil || *s.NativeNs <= 0 || *s.NativeRepeatNs <= 0 {
			continue
		}
		if !slices.Contains(order, s.Cell) {
			order = append(order, s.Cell)
		}
		k := key{s.Cell, s.Target}
		repeat[k] = append(repeat[k], float64(*s.NativeRepeatNs))
		native[k] = append(native[k], float64(*s.NativeNs))
	}
	var out []Imprecise
cells:
	for _, c := range order {
		for _, t := range targets {
			if len(native[key{c, t}]) < manifests.PrecisionMinSamples {
				continue cells
			}
		}
		for _, t := range targets {
			k := key{c, t}
			iv, err := stats.BootstrapPairedRatio(repeat[k], native[k], stats.Level, stats.DefaultResamples, seed)
			if err == nil && iv.High-iv.Low > manifests.AAPrecisionWidth {
				out = append(out, Imprecise{Cell: c, Target: t, N: len(native[k]), Interval: iv})
				break
			}
		}
	}
	return out
}

// cellsOf lists the cells of ws.
func cellsOf(ws []Imprecise) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Cell
	}
	return out
}
