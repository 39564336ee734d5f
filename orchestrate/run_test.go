package orchestrate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/stats"
)

func TestMissingSamplesNamesEachSlot(t *testing.T) {
	order := stats.Interleave([]string{"local", "docker"}, []string{"C01", "C03"}, 2, 5)
	var done []manifests.Sample
	for _, sl := range order[:5] {
		done = append(done, manifests.Sample{Target: sl.Target, Cell: sl.Cell, Round: sl.Round})
	}
	got := missingSamples(order, done)
	var want []string
	for _, sl := range order[5:] {
		want = append(want, fmt.Sprintf("%s %s round %d", sl.Target, sl.Cell, sl.Round))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("missing = %q, want %q", got, want)
	}
	if got := missingSamples(order, nil); len(got) != 8 {
		t.Errorf("all 8 missing: %q", got)
	}
	long := stats.Interleave([]string{"local"}, []string{"C01", "C02", "C03"}, 4, 5)
	if got := missingSamples(long, nil); len(got) != 11 || got[10] != "and 2 more" {
		t.Errorf("12 missing, ten named: %q", got)
	}
}
