package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
	"github.com/sealbench/sealbench/manifests"
)

var allCells = []string{"C01", "C02", "C03", "C04", "C05", "C06", "C07", "C08", "C09", "C10", "C11", "C12"}

var (
	twoSides   = []string{manifests.SideLayerFS, manifests.SideNative}
	threeSides = []string{manifests.SideLayerFS, manifests.SideNative, manifests.SideNativeRepeat}
)

// Three sides take the balanced design's orders: over six consecutive
// rounds, from the seeded start on, every order once, so each side runs in
// each position twice and right after each other side twice; rounds 2k
// and 2k+1 from the start are mirror images, so over any even number of
// rounds each two sides take both orders equally often.
func TestSideOrderIsBalanced(t *testing.T) {
	for seed := uint64(0); seed < 64; seed++ {
		for _, cell := range allCells {
			position := map[string]int{}
			after := map[string]int{}
			orders := map[string]bool{}
			for r := 0; r < 6; r++ {
				got := sideOrder(seed, "local", cell, r, threeSides)
				if again := sideOrder(seed, "local", cell, r, threeSides); !slices.Equal(again, got) {
					t.Fatalf("seed %d %s round %d: %v, then %v", seed, cell, r, got, again)
				}
				orders[strings.Join(got, ",")] = true
				for i, side := range got {
					position[fmt.Sprint(side, i)]++
					if i > 0 {
						after[got[i-1]+">"+side]++
					}
				}
				if r%2 == 1 {
					prev := sideOrder(seed, "local", cell, r-1, threeSides)
					if !slices.Equal(got, []string{prev[2], prev[1], prev[0]}) {
						t.Errorf("seed %d %s: round %d %v is not round %d's %v mirrored", seed, cell, r, got, r-1, prev)
					}
				}
			}
			if len(orders) != 6 {
				t.Errorf("seed %d %s: %d different orders in six rounds, want all 6", seed, cell, len(orders))
			}
			for k, n := range position {
				if n != 2 {
					t.Errorf("seed %d %s: side and position %s %d times in six rounds, want 2", seed, cell, k, n)
				}
			}
			for k, n := range after {
				if n != 2 {
					t.Errorf("seed %d %s: %s (one right after the other) %d times in six rounds, want 2", seed, cell, k, n)
				}
			}
		}
	}
}

// Two sides alternate: each moves one place forward round after round.
func TestSideOrderRotates(t *testing.T) {
	for _, sides := range [][]string{twoSides} {
		n := len(sides)
		for seed := uint64(0); seed < 64; seed++ {
			for _, target := range []string{"local", "docker"} {
				for _, cell := range allCells {
					for r := 0; r < 12; r++ {
						got := sideOrder(seed, target, cell, r, sides)
						if again := sideOrder(seed, target, cell, r, sides); !slices.Equal(again, got) {
							t.Fatalf("seed %d %s %s round %d: %v, then %v", seed, target, cell, r, got, again)
						}
						if len(got) != n {
							t.Fatalf("%v: %d sides", got, len(got))
						}
						next := sideOrder(seed, target, cell, r+1, sides)
						for i, side := range got {
							if next[(i+n-1)%n] != side {
								t.Fatalf("seed %d %s %s: round %d %v, round %d %v: %s did not move one place forward", seed, target, cell, r, got, r+1, next, side)
							}
						}
					}
				}
			}
		}
	}
}

// The start is drawn: for one seed the cells start in different places,
// and changing the seed changes the start of some cell.
func TestSideOrderStartIsSeeded(t *testing.T) {
	for _, sides := range [][]string{twoSides, threeSides} {
		start := func(seed uint64) string {
			var b strings.Builder
			for _, cell := range allCells {
				b.WriteString(sideOrder(seed, "local", cell, 0, sides)[0][:1])
			}
			return b.String()
		}
		seen := map[string]bool{}
		for seed := uint64(0); seed < 32; seed++ {
			s := start(seed)
			for _, side := range sides {
				if !strings.Contains(s, side[:1]) {
					t.Errorf("%d sides, seed %d: no cell starts with %s (%s)", len(sides), seed, side, s)
				}
			}
			seen[s] = true
		}
		if len(seen) < 16 {
			t.Errorf("%d sides: 32 seeds gave only %d different starts over the cells", len(sides), len(seen))
		}
	}
}

// With two sides, the order is what protocol 1 took (LayerFS first in
// round r when r plus a seeded bit is even), so that old runs and new
// draw the same turns for the same seed.
func TestSideOrderOfTwoIsAlternation(t *testing.T) {
	for seed := uint64(0); seed < 8; seed++ {
		a, b := sideOrder(seed, "local", "C06", 0, twoSides), sideOrder(seed, "local", "C06", 1, twoSides)
		if a[0] == b[0] {
			t.Errorf("seed %d: rounds 0 and 1 both start with %s", seed, a[0])
		}
	}
}

func TestParseTimed(t *testing.T) {
	got, err := parseTimed([]byte("12 3 45000000 1 1000 251000 0 100663296 31000000\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := timing{barrier: manifests.Barrier{DirtyPages: 12, WritebackPages: 3, WaitNs: 45000000, Drained: true, PrefaultBytes: 100663296, PrefaultNs: 31000000}, commandNs: 250000}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := parseTimed([]byte("900 40 10000000000 0 5 5 3 0 0\n")); err != nil || got.barrier.Drained || got.rc != 3 || got.commandNs != 0 {
		t.Errorf("not drained, exit 3, no prefault: got %+v, %v", got, err)
	}
	for _, out := range []string{
		"",
		"\n",
		"1000 251000 0\n",                            // the first three fields
		"12 3 45000000 1 1000 251000 0\n",            // protocol 1's seven
		"12 3 45000000 1 1000 251000 0 0 0",          // no newline
		"12 3 45000000 1 1000 251000 0 0 0\n\n",      // two lines
		"x\n12 3 45000000 1 1000 251000 0 0 0\n",     // something before
		"12 3 45000000 1 1000 251000 0 0 0 9\n",      // ten fields
		"12  3 45000000 1 1000 251000 0 0 0\n",       // an empty field
		" 12 3 45000000 1 1000 251000 0 0 0\n",       // leading space
		"12 3 45000000 1 1000 251000 0 0 0 \n",       // trailing space
		"12 3 45e6 1 1000 251000 0 0 0\n",            // not an integer
		"12 3 45000000 yes 1000 251000 0 0 0\n",      // drained not a number
		"12 3 45000000 2 1000 251000 0 0 0\n",        // drained not 0 or 1
		"12 3 -1 1 1000 251000 0 0 0\n",              // negative wait
		"12 3 45000000 1 251000 1000 0 0 0\n",        // the window ends before it starts
		"12 3 45000000 1 0 0 0 0 0\n",                // no clock
		"12 3 45000000 1 1000 251000 256 0 0\n",      // no exit status
		"-1 -1 45000000 1 1000 251000 0 0 0\n",       // no counts in vmstat
		"12 3 45000000 1 1000 251000 0 0 0\r\n",      // CR
		"99999999999999999999 3 1 1 1 2 0 0 0\n",     // overflows
		"12 3 45000000 1 1000 251000 0 -1 0\n",       // negative prefault
		"12 3 45000000 1 1000 251000 0 9 46000000\n", // a prefault longer than the wait
	} {
		if got, err := parseTimed([]byte(out)); err == nil {
			t.Errorf("parseTimed(%q) = %+v, want an error", out, got)
		}
	}
	if _, err := parseTimed([]byte("-1 -1 45000000 1 1000 251000 0 0 0\n")); err == nil || !strings.Contains(err.Error(), "nr_dirty") {
		t.Errorf("missing counts: %v, want an error naming nr_dirty", err)
	}
}

// runTimed runs b's script around body with the host's dash (as the
// Sandbox image's /bin/sh), with a prefault of prefault bytes, and
// parses what it printed. Where tools is not nil, its sync and sleep
// (see fakeTools) come first on PATH.
func runTimed(t *testing.T, b barrier, body string, pf prefault, tools *fakeTools) timing {
	t.Helper()
	if _, err := exec.LookPath("dash"); err != nil {
		t.Skip("no dash here to run the barrier as the Sandbox does:", err)
	}
	cmd := exec.Command("dash", "-c", b.timed(body, pf))
	if tools != nil {
		cmd.Env = append(os.Environ(), "PATH="+tools.dir+":"+os.Getenv("PATH"))
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the timed script: %v: %s", err, out)
	}
	tm, err := parseTimed(out)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// fakeTools are a sync and a sleep that log each call, one line per call,
// instead of syncing or sleeping: the barrier's loop is then counted in
// calls, not measured in time, which scheduling cannot skew. After
// drainAfter calls of sync (when positive), sync writes vmstat's counts
// down to 3 dirty and 1 under write-back: the pages drain while the
// barrier waits.
type fakeTools struct{ dir, log string }

func newFakeTools(t *testing.T, vmstat string, drainAfter int) *fakeTools {
	t.Helper()
	ft := &fakeTools{dir: t.TempDir()}
	ft.log = filepath.Join(ft.dir, "calls")
	drain := ""
	if drainAfter > 0 {
		drain = fmt.Sprintf(`[ "$(grep -c '^sync$' %s)" -ge %d ] && printf 'nr_dirty 3\nnr_writeback 1\n' >%s.tmp && mv %s.tmp %s
`, ft.log, drainAfter, vmstat, vmstat, vmstat)
	}
	for name, script := range map[string]string{
		"sync":  "#!/bin/sh\necho sync >>" + ft.log + "\n" + drain + "exit 0\n",
		"sleep": "#!/bin/sh\necho sleep >>" + ft.log + "\n",
	} {
		if err := os.WriteFile(filepath.Join(ft.dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ft
}

// calls counts the calls of name.
func (ft *fakeTools) calls(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(ft.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == name {
			n++
		}
	}
	return n
}

func fakeVmstat(t *testing.T, path string, dirty, writeback int64) {
	t.Helper()
	text := fmt.Sprintf("nr_free_pages 1000\nnr_zone_inactive_anon 5\nnr_dirty %d\nnr_writeback %d\nnr_writeback_temp 0\nnr_dirtied 77\n", dirty, writeback)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestBarrierDrained(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	fakeVmstat(t, vm, 200, 56)
	ft := newFakeTools(t, vm, 0)
	b := barrier{vmstat: vm, maxPages: 256, deadline: time.Hour, poll: 20 * time.Millisecond}
	tm := runTimed(t, b, "sh -c 'exit 3'", prefault{}, ft)
	if want := (manifests.Barrier{DirtyPages: 200, WritebackPages: 56, WaitNs: tm.barrier.WaitNs, Drained: true}); tm.barrier != want {
		t.Errorf("barrier %+v, want %+v", tm.barrier, want)
	}
	if tm.rc != 3 {
		t.Errorf("rc %d, want the body's 3", tm.rc)
	}
	if s, z := ft.calls(t, "sync"), ft.calls(t, "sleep"); s != 1 || z != 0 {
		t.Errorf("%d syncs and %d sleeps for pages already drained, want one sync and no wait", s, z)
	}
}

// The barrier looks again, syncing, until the pages drain: counted in
// syncs, so that no clock is asserted (a newcomer's make test once failed
// on "waited 299.6 ms, less than the 300 ms the pages took").
func TestBarrierWaitsForTheDrain(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	fakeVmstat(t, vm, 16000, 300)
	ft := newFakeTools(t, vm, 4)
	tm := runTimed(t, barrier{vmstat: vm, maxPages: 256, deadline: time.Hour, poll: 20 * time.Millisecond}, "true", prefault{}, ft)
	if !tm.barrier.Drained || tm.barrier.DirtyPages != 3 || tm.barrier.WritebackPages != 1 {
		t.Errorf("barrier %+v, want drained at 3 and 1", tm.barrier)
	}
	if s, z := ft.calls(t, "sync"), ft.calls(t, "sleep"); s != 4 || z != 3 {
		t.Errorf("%d syncs and %d sleeps, want 4 and 3: the first sync, then a wait and a sync per look until the fourth drained the pages", s, z)
	}
}

func TestBarrierDeadline(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	fakeVmstat(t, vm, 16000, 300)
	b := barrier{vmstat: vm, maxPages: 256, deadline: 300 * time.Millisecond, poll: 20 * time.Millisecond}
	tm := runTimed(t, b, "true", prefault{}, nil)
	if tm.barrier.Drained || tm.barrier.DirtyPages != 16000 || tm.barrier.WritebackPages != 300 {
		t.Errorf("barrier %+v, want not drained, at 16000 and 300", tm.barrier)
	}
	// The loop ends only once the deadline has passed on the script's
	// own clock: a lower bound that no scheduling can break.
	if tm.barrier.WaitNs < int64(b.deadline) {
		t.Errorf("waited %v with a deadline of %v", time.Duration(tm.barrier.WaitNs), b.deadline)
	}
}

func TestBarrierWithoutCounts(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	if err := os.WriteFile(vm, []byte("nr_free_pages 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := barrier{vmstat: vm, maxPages: 256, deadline: 100 * time.Millisecond, poll: 20 * time.Millisecond}
	out, err := exec.Command("dash", "-c", b.timed("true", prefault{})).Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseTimed(out); err == nil || !strings.Contains(err.Error(), "nr_dirty") {
		t.Errorf("%q: %v, want an error naming nr_dirty", out, err)
	}
}

// TestBarrierWithoutVMStat: a kernel with no /proc/vmstat at all (gVisor's
// Sentry) gets sync(2) alone, at once, and the sample says the barrier
// measured nothing; a vmstat without the counts is still an error (above).
func TestBarrierWithoutVMStat(t *testing.T) {
	ft := newFakeTools(t, "", 0)
	b := barrier{vmstat: filepath.Join(t.TempDir(), "vmstat"), maxPages: 256, deadline: time.Hour, poll: 20 * time.Millisecond}
	tm := runTimed(t, b, "true", prefault{}, ft)
	if want := (manifests.Barrier{WaitNs: tm.barrier.WaitNs, Unmeasured: true}); tm.barrier != want {
		t.Errorf("barrier %+v, want %+v", tm.barrier, want)
	}
	if s, z := ft.calls(t, "sync"), ft.calls(t, "sleep"); s != 1 || z != 0 {
		t.Errorf("%d syncs and %d sleeps, want sync(2) alone, once", s, z)
	}
}

// The prefault writes its throwaway file after the drain and before the
// window, and empties it (under protocol 5 the runner frees no inode
// while sampling): the window sees an empty file, and the sample records
// its size (rounded up to whole MiB) and time. A prefault that cannot write records 0 bytes,
// leaves no data, and the window opens all the same.
func TestBarrierPrefault(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	fakeVmstat(t, vm, 0, 0)
	b := barrier{vmstat: vm, maxPages: 256, deadline: time.Hour, poll: 20 * time.Millisecond}
	dir := t.TempDir()
	f := filepath.Join(dir, "prefault.tmp")
	tm := runTimed(t, b, "test -f "+f+" && test ! -s "+f, prefault{dir: dir, bytes: 8<<20 - 5}, nil)
	if tm.barrier.PrefaultBytes != 8<<20 || tm.barrier.PrefaultNs <= 0 || tm.barrier.PrefaultNs > tm.barrier.WaitNs || tm.rc != 0 {
		t.Errorf("barrier %+v, rc %d: want 8 MiB prefaulted within the wait, and its file there but empty before the window", tm.barrier, tm.rc)
	}
	// The next window's prefault writes the same file: still one, empty.
	ino := func() uint64 {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	before := ino()
	if tm := runTimed(t, b, "test ! -s "+f, prefault{dir: dir, bytes: 1 << 20}, nil); tm.barrier.PrefaultBytes != 1<<20 || tm.rc != 0 {
		t.Errorf("a second prefault: barrier %+v, rc %d", tm.barrier, tm.rc)
	}
	if after := ino(); after != before {
		t.Errorf("the second prefault's file is inode %d, the first's %d: one was removed", after, before)
	}
	// A directory that is not there: dd cannot write.
	tm = runTimed(t, b, "true", prefault{dir: filepath.Join(dir, "missing"), bytes: 1 << 20}, nil)
	if tm.barrier.PrefaultBytes != 0 || tm.rc != 0 {
		t.Errorf("a prefault that cannot write: barrier %+v, rc %d; want 0 bytes recorded and the body run", tm.barrier, tm.rc)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "prefault.tmp" {
		t.Errorf("the prefaults left %v, want their one empty file", ents)
	}
}

// The barrier every sample uses, against this kernel's own counts.
func TestBarrierOnThisKernel(t *testing.T) {
	if _, err := os.Stat(writeBack.vmstat); err != nil {
		t.Skip("no /proc/vmstat here:", err)
	}
	b := writeBack
	b.deadline = 3 * time.Second // a busy shared machine may not drain; the numbers must still be sane
	tm := runTimed(t, b, "true", prefault{}, nil)
	if tm.barrier.Drained && tm.barrier.DirtyPages+tm.barrier.WritebackPages > b.maxPages {
		t.Errorf("drained at %+v, over %d pages", tm.barrier, b.maxPages)
	}
	if !tm.barrier.Drained && tm.barrier.WaitNs < int64(b.deadline) {
		t.Errorf("not drained after %v, before the deadline", time.Duration(tm.barrier.WaitNs))
	}
	t.Logf("barrier: %+v", tm.barrier)
}

// protocolSample is a sample as runSample recorded it under protocol 2
// (the sides rotated to put first first), or under protocol 1 when v1:
// no repeat, no discard, no prefault.
func protocolSample(target, cell string, round int, first string, v1 bool) manifests.Sample {
	sides := []string{manifests.SideLayerFS}
	switch {
	case first != "" && v1:
		sides = twoSides
	case first != "":
		sides = threeSides
	}
	i := max(slices.Index(sides, first), 0)
	s := orderedSample(target, cell, round, append(slices.Clone(sides[i:]), sides[:i]...), 2)
	if v1 {
		s.Protocol = 0
		for i := range s.Phases {
			s.Phases[i].Discarded = false
			if b := s.Phases[i].Barrier; b != nil {
				s.Phases[i].Barrier = &manifests.Barrier{DirtyPages: 1, Drained: true}
			}
		}
		// Protocol 1: each side's warm-up, then its timed run.
		n := len(s.Phases) / 2
		var interleaved []manifests.Phase
		for j := 0; j < n; j++ {
			interleaved = append(interleaved, s.Phases[j], s.Phases[n+j])
		}
		s.Phases = interleaved
	}
	return s
}

// orderedSample is a sample as runSample records it under protocol (2 or
// later): the sides' warm-ups, then their windows, in order.
func orderedSample(target, cell string, round int, order []string, protocol int) manifests.Sample {
	first := ""
	if len(order) > 1 {
		first = order[0]
	}
	s := manifests.Sample{Target: target, Cell: cell, Round: round, Status: manifests.StatusOK, First: first, Protocol: protocol}
	b := &manifests.Barrier{DirtyPages: 1, Drained: true, WaitNs: 3e6, PrefaultBytes: 32 << 20, PrefaultNs: 2e6}
	dirs := map[string][2]string{
		manifests.SideLayerFS:      {workspaceDir("1"), workspaceDir("2")},
		manifests.SideNative:       {nativeDir("1"), nativeDir("2")},
		manifests.SideNativeRepeat: {nativeDir("3"), nativeDir("4")},
	}
	var timed []manifests.Phase
	for _, side := range order {
		warm := manifests.Phase{Side: side, Kind: manifests.PhaseWarmUp, Dir: dirs[side][0], Discarded: true}
		window := manifests.Phase{Side: side, Kind: manifests.PhaseTimed, Dir: dirs[side][1], Barrier: b}
		s.Phases, timed = append(s.Phases, warm), append(timed, window)
	}
	s.Phases = append(s.Phases, timed...)
	return s
}

func TestCheckProtocol(t *testing.T) {
	var good []manifests.Sample
	for c, cell := range allCells {
		for r := 0; r < 7; r++ {
			good = append(good,
				orderedSample("local", cell, r, sideOrder(3, "local", cell, r, threeSides), manifests.ProtocolVersion),
				protocolSample("v2", cell, r, threeSides[(c+r)%3], false),
				protocolSample("old", cell, r, sideOrder(3, "old", cell, r, twoSides)[0], true),
				protocolSample("plain", cell, r, "", false))
		}
	}
	if err := CheckProtocol(good); err != nil {
		t.Fatal(err)
	}

	ln, nat, rep := manifests.SideLayerFS, manifests.SideNative, manifests.SideNativeRepeat
	for name, tc := range map[string]struct {
		s    []manifests.Sample
		want string
	}{
		"protocol 3, one order twice": {[]manifests.Sample{
			orderedSample("local", "C06", 0, []string{ln, nat, rep}, 3), orderedSample("local", "C06", 1, []string{ln, nat, rep}, 3)},
			"does not follow round 0's in the balanced design"},
		"protocol 3, the rotation of protocol 2": {[]manifests.Sample{
			orderedSample("local", "C06", 0, []string{ln, nat, rep}, 3), orderedSample("local", "C06", 1, []string{nat, rep, ln}, 3)},
			"does not follow round 0's in the balanced design"},
		"protocol 3, a window twice": {[]manifests.Sample{func() manifests.Sample {
			s := orderedSample("local", "C06", 0, []string{ln, nat, rep}, 3)
			s.Phases[5].Side = nat
			return s
		}()}, "not each of layerfs, native, nativeRepeat once"},
		"protocol 3, first not the first window": {[]manifests.Sample{func() manifests.Sample {
			s := orderedSample("local", "C06", 0, []string{rep, nat, ln}, 3)
			s.First = nat
			return s
		}()}, "first is native, but nativeRepeat's window came first"},
		"same side first twice": {[]manifests.Sample{
			protocolSample("local", "C06", 0, ln, false), protocolSample("local", "C06", 1, ln, false)},
			"do not take turns"},
		"three sides not rotating": {[]manifests.Sample{
			protocolSample("local", "C06", 0, ln, false), protocolSample("local", "C06", 1, rep, false)},
			"do not take turns"},
		"protocol 1, same side first twice": {[]manifests.Sample{
			protocolSample("local", "C06", 0, nat, true), protocolSample("local", "C06", 2, ln, true)},
			"do not take turns"},
		"no native warm-up": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, nat, false)
			s.Phases = s.Phases[1:]
			return s
		}()}, "5 phases, want 6"},
		"no repeat": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, nat, false)
			s.Phases = slices.Delete(s.Phases, 5, 6)
			s.Phases = slices.Delete(s.Phases, 1, 2)
			return s
		}()}, "4 phases, want 6"},
		"protocol 2, a window beside its warm-up": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, nat, false)
			s.Phases[1], s.Phases[3] = s.Phases[3], s.Phases[1]
			return s
		}()}, "want the warm-ups of native, nativeRepeat, layerfs, then their windows in the same order"},
		"order not as first says": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, nat, false)
			s.First = ln
			return s
		}()}, "want the warm-ups of layerfs, native, nativeRepeat"},
		"timed where the warm-up ran": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, ln, false)
			s.Phases[4].Dir = s.Phases[1].Dir
			return s
		}()}, "not a fresh directory"},
		"no barrier": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, "", false)
			s.Phases[1].Barrier = nil
			return s
		}()}, "no barrier"},
		"no prefault": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, nat, false)
			s.Phases[3].Barrier = &manifests.Barrier{Drained: true}
			return s
		}()}, "native's timed run had no prefault"},
		"warm-up output kept": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, nat, false)
			s.Phases[0].Discarded = false
			return s
		}()}, "native's warm-up output was kept"},
	} {
		err := CheckProtocol(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}

	failed := protocolSample("local", "C06", 0, nat, false)
	failed.Status, failed.Phases = manifests.StatusFailed, failed.Phases[:1]
	if err := CheckProtocol([]manifests.Sample{failed}); err != nil {
		t.Errorf("a failed sample stops early and is not checked: %v", err)
	}
}

// TestMountTransport: LayerFS is mounted over /dev/fuse where the run
// pinned FUSE over io_uring off (--fuse-uring=off, or a host without it),
// whatever enable_uring reads meanwhile; elsewhere layerfsd chooses.
func TestMountTransport(t *testing.T) {
	for pin, want := range map[string]string{
		manifests.FUSEURingOff: daemonapi.TransportDev,
		manifests.FUSEURingOn:  "",
		manifests.FUSEURingNA:  "",
		"":                     "", // a plan from before the pin
	} {
		id := &engine.Identity{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{FUSEURing: pin}}}
		if got := mountTransport(id); got != want {
			t.Errorf("pinned %q: --fuse-transport %q, want %q", pin, got, want)
		}
	}
}
