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
// barrier and the timed run in a fresh directory, the sides in the order
// First says (LayerFS alone without a native reference); and over the
// rounds of each target and cell, the sides taking turns going first.
// Under protocol 1 each side's timed run follows its own warm-up. Under
// protocol 2 every warm-up comes first, its output discarded, then the
// windows one after another, each after a prefault; the native
// reference's A/A repeat is a third side, and the three rotate their
// positions round after round. Under protocol 3 the three take
// manifests.BalancedOrders in turn instead. It reports every problem it
// finds. Failed samples are skipped: they stop at their first failing
// step.
func CheckProtocol(samples []manifests.Sample) error {
	var problems []string
	bad := func(s *manifests.Sample, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s %s round %d: ", s.Target, s.Cell, s.Round)+fmt.Sprintf(format, a...))
	}
	type key struct{ target, cell string }
	type start struct {
		first    string
		sides    int // how many sides rotate
		pos      int // First's position among them
		balanced int // the order's index in manifests.BalancedOrders (protocol 3); -1 before
	}
	firsts := map[key]map[int]start{}
	for i := range samples {
		s := &samples[i]
		if s.Status != manifests.StatusOK {
			continue
		}
		v2 := s.Protocol >= 2
		sides := []string{manifests.SideLayerFS}
		if s.First != "" {
			sides = append(sides, manifests.SideNative)
			if v2 {
				sides = append(sides, manifests.SideNativeRepeat)
			}
		}
		pos := slices.Index(sides, s.First)
		if s.First != "" && pos < 0 {
			bad(s, "first is %q", s.First)
			continue
		}
		want := sides
		if pos > 0 {
			want = append(slices.Clone(sides[pos:]), sides[:pos]...)
		}
		if len(s.Phases) != 2*len(want) {
			bad(s, "%d phases, want %d (%s)", len(s.Phases), 2*len(want), phaseList(s.Phases))
			continue
		}
		balanced := -1
		if s.Protocol >= 3 && len(sides) == 3 {
			// The order is one of the balanced design's: the windows
			// say which, and the rounds are checked to take them in turn.
			want = timedSides(s.Phases)
			if balanced = balancedIndex(want, sides); balanced < 0 {
				bad(s, "windows %s: not each of %s once", phaseList(s.Phases), strings.Join(sides, ", "))
				continue
			}
			if want[0] != s.First {
				bad(s, "first is %s, but %s's window came first", s.First, want[0])
				continue
			}
		}
		if s.First != "" {
			k := key{s.Target, s.Cell}
			if firsts[k] == nil {
				firsts[k] = map[int]start{}
			}
			firsts[k][s.Round] = start{s.First, len(sides), pos, balanced}
		}
		// Where side j's warm-up and timed run stand among the phases.
		at := func(j int) (warm, timed int) { return 2 * j, 2*j + 1 }
		if v2 {
			at = func(j int) (int, int) { return j, len(want) + j }
		}
		for j, side := range want {
			wi, ti := at(j)
			warm, timed := s.Phases[wi], s.Phases[ti]
			if warm.Side != side || warm.Kind != manifests.PhaseWarmUp || timed.Side != side || timed.Kind != manifests.PhaseTimed {
				if v2 {
					bad(s, "phases %s, want the warm-ups of %s, then their windows in the same order", phaseList(s.Phases), strings.Join(want, ", "))
				} else {
					bad(s, "phases %s, want %s's warm-up, then its timed run, in turn %d", phaseList(s.Phases), side, j+1)
				}
				break
			}
			if timed.Barrier == nil {
				bad(s, "%s's timed run had no barrier", side)
			} else if v2 && timed.Barrier.PrefaultBytes <= 0 {
				bad(s, "%s's timed run had no prefault: its window may write into memory freed long before, which the other sides did not", side)
			}
			if v2 && !warm.Discarded {
				bad(s, "%s's warm-up output was kept: the other sides' went away before their windows", side)
			}
			for _, earlier := range s.Phases[:ti] {
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
			a, b := byRound[r0], byRound[r1]
			if a.sides != b.sides || (a.balanced < 0) != (b.balanced < 0) {
				continue // rounds of different protocols: nothing to compare
			}
			n := len(manifests.BalancedOrders)
			if a.balanced >= 0 && (a.balanced+r1-r0)%n != b.balanced {
				problems = append(problems, fmt.Sprintf("%s %s: the windows' order of round %d does not follow round %d's in the balanced design: %s",
					k.target, k.cell, r1, r0, "the sides do not take turns"))
			}
			if a.balanced < 0 && (a.pos+r1-r0)%a.sides != b.pos {
				problems = append(problems, fmt.Sprintf("%s %s: %s went first in round %d and %s in round %d: the sides do not take turns",
					k.target, k.cell, a.first, r0, b.first, r1))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return fmt.Errorf("the cache protocol did not run as it should:\n  %s", strings.Join(problems, "\n  "))
}

// timedSides are the sides of the timed phases, in their order.
func timedSides(phases []manifests.Phase) []string {
	var out []string
	for _, p := range phases {
		if p.Kind == manifests.PhaseTimed {
			out = append(out, p.Side)
		}
	}
	return out
}

// balancedIndex is where order stands in manifests.BalancedOrders, as
// indexes into sides; -1 when it is not there (not each side once).
func balancedIndex(order, sides []string) int {
	if len(order) != len(sides) {
		return -1
	}
	for i, o := range manifests.BalancedOrders {
		if sides[o[0]] == order[0] && sides[o[1]] == order[1] && sides[o[2]] == order[2] {
			return i
		}
	}
	return -1
}

// phaseList is phases as "side kind, ..." for a message.
func phaseList(phases []manifests.Phase) string {
	var b []string
	for _, p := range phases {
		b = append(b, p.Side+" "+p.Kind)
	}
	return "[" + strings.Join(b, ", ") + "]"
}
