package runner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sealbench/sealbench/manifests"
)

// CheckProtocol checks, from the phases the samples recorded and not from
// their timings, that the cache protocol ran as runSample means it to:
// in every sample that finished, each side an untimed warm-up and then a
// barrier and the timed run in a fresh directory, the sides one after
// the other in the order First says (LayerFS alone without a native
// reference); and over the rounds of each target and cell, LayerFS and
// native taking turns going first. It reports every problem it finds.
// Failed samples are skipped: they stop at their first failing step.
func CheckProtocol(samples []manifests.Sample) error {
	var problems []string
	bad := func(s *manifests.Sample, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s %s round %d: ", s.Target, s.Cell, s.Round)+fmt.Sprintf(format, a...))
	}
	type key struct{ target, cell string }
	firsts := map[key]map[int]string{}
	for i := range samples {
		s := &samples[i]
		if s.Status != manifests.StatusOK {
			continue
		}
		want := []string{manifests.SideLayerFS}
		switch s.First {
		case "":
		case manifests.SideLayerFS:
			want = []string{manifests.SideLayerFS, manifests.SideNative}
		case manifests.SideNative:
			want = []string{manifests.SideNative, manifests.SideLayerFS}
		default:
			bad(s, "first is %q", s.First)
			continue
		}
		if s.First != "" {
			k := key{s.Target, s.Cell}
			if firsts[k] == nil {
				firsts[k] = map[int]string{}
			}
			firsts[k][s.Round] = s.First
		}
		if len(s.Phases) != 2*len(want) {
			bad(s, "%d phases, want %d (%s)", len(s.Phases), 2*len(want), phaseList(s.Phases))
			continue
		}
		for j, side := range want {
			warm, timed := s.Phases[2*j], s.Phases[2*j+1]
			if warm.Side != side || warm.Kind != manifests.PhaseWarmUp || timed.Side != side || timed.Kind != manifests.PhaseTimed {
				bad(s, "phases %s, want %s's warm-up, then its timed run, in turn %d", phaseList(s.Phases), side, j+1)
				continue
			}
			if timed.Barrier == nil {
				bad(s, "%s's timed run had no barrier", side)
			}
			for _, earlier := range s.Phases[:2*j+1] {
				if earlier.Dir == timed.Dir {
					bad(s, "%s's timed run in %s, where its %s %s ran before: not a fresh directory", side, timed.Dir, earlier.Side, earlier.Kind)
				}
			}
		}
	}
	for k, byRound := range firsts {
		rounds := make([]int, 0, len(byRound))
		for r := range byRound {
			rounds = append(rounds, r)
		}
		slices.Sort(rounds)
		for i := 1; i < len(rounds); i++ {
			r0, r1 := rounds[i-1], rounds[i]
			if (byRound[r0] == byRound[r1]) == ((r1-r0)%2 == 1) {
				problems = append(problems, fmt.Sprintf("%s %s: %s went first in rounds %d and %s in %d: the sides do not take turns",
					k.target, k.cell, byRound[r0], r0, byRound[r1], r1))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return fmt.Errorf("the cache protocol did not run as it should:\n  %s", strings.Join(problems, "\n  "))
}

// phaseList is phases as "side kind, ..." for a message.
func phaseList(phases []manifests.Phase) string {
	var b []string
	for _, p := range phases {
		b = append(b, p.Side+" "+p.Kind)
	}
	return "[" + strings.Join(b, ", ") + "]"
}
