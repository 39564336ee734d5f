// Package benchstat writes a run's samples in the Go benchmark format
// (golang.org/x/perf/benchfmt), so that `benchstat old.txt new.txt`
// compares two runs as Go people compare two builds: one benchmark per
// cell, target and side, each sample one result line. A name carries its
// cell's code and title (BenchmarkC01_create_1_000_files) and the keys
// target= and side= as sub-benchmarks; the file's configuration lines say
// which run and bundle the samples are of.
//
// It is apart from package report so that the renderer links no
// benchmark-format code and the format no renderer.
package benchstat

import (
	"fmt"
	"io"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
)

// The sides a sample's lines are of: LayerFS's command time, the native
// reference's and its A/A repeat's.
var sides = []struct {
	name string
	of   func(*manifests.Sample) (float64, bool)
}{
	{manifests.SideLayerFS, func(s *manifests.Sample) (float64, bool) { return float64(s.CommandNs), s.CommandNs > 0 }},
	{manifests.SideNative, func(s *manifests.Sample) (float64, bool) { return ns(s.NativeNs) }},
	{manifests.SideNativeRepeat, func(s *manifests.Sample) (float64, bool) { return ns(s.NativeRepeatNs) }},
}

func ns(p *int64) (float64, bool) {
	if p == nil || *p <= 0 {
		return 0, false
	}
	return float64(*p), true
}

// Write writes the ok samples of one run (as manifests.ReadSamples read
// them) in the benchmark format: per sample and side, one line of
// sec/op. Failed and ineligible samples have no timing to give, and are
// left out.
func Write(w io.Writer, samples []manifests.Sample) error {
	bw := benchfmt.NewWriter(w)
	for i := range samples {
		s := &samples[i]
		if s.Status != manifests.StatusOK {
			continue
		}
		name, err := Name(s.Cell)
		if err != nil {
			return err
		}
		for _, side := range sides {
			v, ok := side.of(s)
			if !ok {
				continue
			}
			r := &benchfmt.Result{
				Config: []benchfmt.Config{
					{Key: "sealbench-run", Value: []byte(s.RunID), File: true},
					{Key: "sealbench-bundle", Value: []byte(s.BundleID), File: true},
				},
				Name:   benchfmt.Name(name + "/target=" + s.Target + "/side=" + side.name),
				Iters:  1,
				Values: []benchfmt.Value{{Value: v / 1e9, Unit: "sec/op"}},
			}
			if err := bw.Write(r); err != nil {
				return fmt.Errorf("writing %s: %w", name, err)
			}
		}
	}
	return nil
}

// Name is cell's benchmark name, its code and its title as letters,
// digits and underscores (C01_create_1_000_files); the format writes it
// after "Benchmark".
func Name(cell string) (string, error) {
	c, err := cells.Lookup(cell)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(c.Name)
	under := true // the title comes after an underscore
	for _, r := range strings.ToLower(c.Title) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok && under:
			b.WriteByte('_')
			fallthrough
		case ok:
			b.WriteRune(r)
			under = false
		default:
			under = true
		}
	}
	return b.String(), nil
}
