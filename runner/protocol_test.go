package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

var allCells = []string{"C01", "C02", "C03", "C04", "C05", "C06", "C07", "C08", "C09", "C10", "C11", "C12"}

func TestLayerFSFirstAlternatesPerCell(t *testing.T) {
	for seed := uint64(0); seed < 64; seed++ {
		for _, target := range []string{"local", "docker"} {
			for _, cell := range allCells {
				prev := layerFSFirst(seed, target, cell, 0)
				for r := 1; r < 12; r++ {
					got := layerFSFirst(seed, target, cell, r)
					if got == prev {
						t.Fatalf("seed %d %s %s: rounds %d and %d both LayerFS-first=%v", seed, target, cell, r-1, r, got)
					}
					if again := layerFSFirst(seed, target, cell, r); again != got {
						t.Fatalf("seed %d %s %s round %d: %v, then %v", seed, target, cell, r, got, again)
					}
					prev = got
				}
			}
		}
	}
}

// The start is drawn: for one seed both starts occur across the cells,
// and changing the seed changes the start of some cell.
func TestLayerFSFirstStartIsSeeded(t *testing.T) {
	start := func(seed uint64) string {
		var b strings.Builder
		for _, cell := range allCells {
			if layerFSFirst(seed, "local", cell, 0) {
				b.WriteByte('L')
			} else {
				b.WriteByte('n')
			}
		}
		return b.String()
	}
	seen := map[string]bool{}
	for seed := uint64(0); seed < 32; seed++ {
		s := start(seed)
		if !strings.Contains(s, "L") || !strings.Contains(s, "n") {
			t.Errorf("seed %d: every cell starts the same way (%s)", seed, s)
		}
		seen[s] = true
	}
	if len(seen) < 16 {
		t.Errorf("32 seeds gave only %d different starts over the cells", len(seen))
	}
	if layerFSFirst(3, "local", "C06", 0) == layerFSFirst(3, "local", "C06", 1) {
		t.Error("rounds 0 and 1 of one cell start alike")
	}
}

func TestParseTimed(t *testing.T) {
	got, err := parseTimed([]byte("12 3 45000000 1 1000 251000 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := timing{barrier: manifests.Barrier{DirtyPages: 12, WritebackPages: 3, WaitNs: 45000000, Drained: true}, commandNs: 250000}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := parseTimed([]byte("900 40 10000000000 0 5 5 3\n")); err != nil || got.barrier.Drained || got.rc != 3 || got.commandNs != 0 {
		t.Errorf("not drained, exit 3: got %+v, %v", got, err)
	}
	for _, out := range []string{
		"",
		"\n",
		"1000 251000 0\n",                    // the old three fields
		"12 3 45000000 1 1000 251000 0",      // no newline
		"12 3 45000000 1 1000 251000 0\n\n",  // two lines
		"x\n12 3 45000000 1 1000 251000 0\n", // something before
		"12 3 45000000 1 1000 251000 0 9\n",  // eight fields
		"12  3 45000000 1 1000 251000 0\n",   // an empty field
		" 12 3 45000000 1 1000 251000 0\n",   // leading space
		"12 3 45000000 1 1000 251000 0 \n",   // trailing space
		"12 3 45e6 1 1000 251000 0\n",        // not an integer
		"12 3 45000000 yes 1000 251000 0\n",  // drained not a number
		"12 3 45000000 2 1000 251000 0\n",    // drained not 0 or 1
		"12 3 -1 1 1000 251000 0\n",          // negative wait
		"12 3 45000000 1 251000 1000 0\n",    // the window ends before it starts
		"12 3 45000000 1 0 0 0\n",            // no clock
		"12 3 45000000 1 1000 251000 256\n",  // no exit status
		"-1 -1 45000000 1 1000 251000 0\n",   // no counts in vmstat
		"12 3 45000000 1 1000 251000 0\r\n",  // CR
		"99999999999999999999 3 1 1 1 2 0\n", // overflows
	} {
		if got, err := parseTimed([]byte(out)); err == nil {
			t.Errorf("parseTimed(%q) = %+v, want an error", out, got)
		}
	}
	if _, err := parseTimed([]byte("-1 -1 45000000 1 1000 251000 0\n")); err == nil || !strings.Contains(err.Error(), "nr_dirty") {
		t.Errorf("missing counts: %v, want an error naming nr_dirty", err)
	}
}

// runTimed runs b's script around body with the host's /bin/sh (dash on
// Debian, as in the Sandbox image) and parses what it printed.
func runTimed(t *testing.T, b barrier, body string) timing {
	t.Helper()
	if _, err := exec.LookPath("dash"); err != nil {
		t.Skip("no dash here to run the barrier as the Sandbox does:", err)
	}
	out, err := exec.Command("dash", "-c", b.timed(body)).Output()
	if err != nil {
		t.Fatalf("the timed script: %v: %s", err, out)
	}
	tm, err := parseTimed(out)
	if err != nil {
		t.Fatal(err)
	}
	return tm
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
	b := barrier{vmstat: vm, maxPages: 256, deadline: 5 * time.Second, poll: 20 * time.Millisecond}
	tm := runTimed(t, b, "sh -c 'sleep 0.1; exit 3'")
	if want := (manifests.Barrier{DirtyPages: 200, WritebackPages: 56, WaitNs: tm.barrier.WaitNs, Drained: true}); tm.barrier != want {
		t.Errorf("barrier %+v, want %+v", tm.barrier, want)
	}
	if tm.rc != 3 {
		t.Errorf("rc %d, want the body's 3", tm.rc)
	}
	if tm.commandNs < 100e6 || tm.commandNs > 5e9 {
		t.Errorf("the window of a 0.1 s body was %v", time.Duration(tm.commandNs))
	}
	if tm.barrier.WaitNs <= 0 || tm.barrier.WaitNs > int64(b.deadline) {
		t.Errorf("waited %v for pages already drained", time.Duration(tm.barrier.WaitNs))
	}
}

func TestBarrierWaitsForTheDrain(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	fakeVmstat(t, vm, 16000, 300)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(300 * time.Millisecond)
		fakeVmstat(t, vm, 3, 1)
	}()
	tm := runTimed(t, barrier{vmstat: vm, maxPages: 256, deadline: 20 * time.Second, poll: 20 * time.Millisecond}, "true")
	<-done
	if !tm.barrier.Drained || tm.barrier.DirtyPages != 3 || tm.barrier.WritebackPages != 1 {
		t.Errorf("barrier %+v, want drained at 3 and 1", tm.barrier)
	}
	if tm.barrier.WaitNs < 300e6 {
		t.Errorf("the barrier waited %v, less than the 300 ms the pages took", time.Duration(tm.barrier.WaitNs))
	}
}

func TestBarrierDeadline(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	fakeVmstat(t, vm, 16000, 300)
	b := barrier{vmstat: vm, maxPages: 256, deadline: 300 * time.Millisecond, poll: 20 * time.Millisecond}
	tm := runTimed(t, b, "true")
	if tm.barrier.Drained || tm.barrier.DirtyPages != 16000 || tm.barrier.WritebackPages != 300 {
		t.Errorf("barrier %+v, want not drained, at 16000 and 300", tm.barrier)
	}
	if tm.barrier.WaitNs < int64(b.deadline) || tm.barrier.WaitNs > 10*int64(b.deadline) {
		t.Errorf("waited %v with a deadline of %v", time.Duration(tm.barrier.WaitNs), b.deadline)
	}
}

func TestBarrierWithoutCounts(t *testing.T) {
	vm := filepath.Join(t.TempDir(), "vmstat")
	if err := os.WriteFile(vm, []byte("nr_free_pages 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := barrier{vmstat: vm, maxPages: 256, deadline: 100 * time.Millisecond, poll: 20 * time.Millisecond}
	out, err := exec.Command("dash", "-c", b.timed("true")).Output()
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
	b := barrier{vmstat: filepath.Join(t.TempDir(), "vmstat"), maxPages: 256, deadline: 5 * time.Second, poll: 20 * time.Millisecond}
	out, err := exec.Command("dash", "-c", b.timed("true")).Output()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := parseTimed(out)
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if want := (manifests.Barrier{WaitNs: tm.barrier.WaitNs, Unmeasured: true}); tm.barrier != want || tm.barrier.WaitNs >= int64(b.deadline) {
		t.Errorf("%q: barrier %+v, want %+v, at once", out, tm.barrier, want)
	}
}

// The barrier every sample uses, against this kernel's own counts.
func TestBarrierOnThisKernel(t *testing.T) {
	if _, err := os.Stat(writeBack.vmstat); err != nil {
		t.Skip("no /proc/vmstat here:", err)
	}
	b := writeBack
	b.deadline = 3 * time.Second // a busy shared machine may not drain; the numbers must still be sane
	tm := runTimed(t, b, "true")
	if tm.barrier.Drained && tm.barrier.DirtyPages+tm.barrier.WritebackPages > b.maxPages {
		t.Errorf("drained at %+v, over %d pages", tm.barrier, b.maxPages)
	}
	if !tm.barrier.Drained && tm.barrier.WaitNs < int64(b.deadline) {
		t.Errorf("not drained after %v, before the deadline", time.Duration(tm.barrier.WaitNs))
	}
	t.Logf("barrier: %+v", tm.barrier)
}

// protocolSample is a sample as runSample records it.
func protocolSample(target, cell string, round int, first string) manifests.Sample {
	b := &manifests.Barrier{DirtyPages: 1, Drained: true}
	l := []manifests.Phase{
		{Side: manifests.SideLayerFS, Kind: manifests.PhaseWarmUp, Dir: workspaceDir("1")},
		{Side: manifests.SideLayerFS, Kind: manifests.PhaseTimed, Dir: workspaceDir("2"), Barrier: b},
	}
	n := []manifests.Phase{
		{Side: manifests.SideNative, Kind: manifests.PhaseWarmUp, Dir: nativeDir("1")},
		{Side: manifests.SideNative, Kind: manifests.PhaseTimed, Dir: nativeDir("2"), Barrier: b},
	}
	s := manifests.Sample{Target: target, Cell: cell, Round: round, Status: manifests.StatusOK, First: first}
	switch first {
	case "":
		s.Phases = l
	case manifests.SideLayerFS:
		s.Phases = append(l, n...)
	default:
		s.Phases = append(n, l...)
	}
	return s
}

func TestCheckProtocol(t *testing.T) {
	var good []manifests.Sample
	for _, cell := range allCells {
		for r := 0; r < 4; r++ {
			first := manifests.SideNative
			if layerFSFirst(3, "local", cell, r) {
				first = manifests.SideLayerFS
			}
			good = append(good, protocolSample("local", cell, r, first), protocolSample("plain", cell, r, ""))
		}
	}
	if err := CheckProtocol(good); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		s    []manifests.Sample
		want string
	}{
		"same side first twice": {[]manifests.Sample{
			protocolSample("local", "C06", 0, manifests.SideLayerFS), protocolSample("local", "C06", 1, manifests.SideLayerFS)},
			"do not take turns"},
		"no native warm-up": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, manifests.SideNative)
			s.Phases = s.Phases[1:]
			return s
		}()}, "3 phases, want 4"},
		"order not as first says": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, manifests.SideNative)
			s.First = manifests.SideLayerFS
			return s
		}()}, "want layerfs's warm-up"},
		"timed where the warm-up ran": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, manifests.SideLayerFS)
			s.Phases[3].Dir = s.Phases[2].Dir
			return s
		}()}, "not a fresh directory"},
		"no barrier": {[]manifests.Sample{func() manifests.Sample {
			s := protocolSample("local", "C06", 0, "")
			s.Phases[1].Barrier = nil
			return s
		}()}, "no barrier"},
	} {
		err := CheckProtocol(tc.s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}

	failed := protocolSample("local", "C06", 0, manifests.SideNative)
	failed.Status, failed.Phases = manifests.StatusFailed, failed.Phases[:1]
	if err := CheckProtocol([]manifests.Sample{failed}); err != nil {
		t.Errorf("a failed sample stops early and is not checked: %v", err)
	}
}
