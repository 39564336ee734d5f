package runner

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

// BenchmarkPrefault measures, on this machine, what the protocol's
// prefault is for: whether a timed window that writes 64 MiB is slowed by
// the memory it is given, with no prefault, with an anonymous one (the
// first mechanism tried), and with the throwaway file the runner uses.
// Each round runs the three one after another, in a rotated order, each
// as a side of a sample does: a warm-up that writes 64 MiB and is
// removed, a commit-like 64 MiB file kept, then the runner's own barrier
// script with the prefault and the window. Between rounds the machine
// idles a seeded 0-4 s, so that a balloon's free page reporting (where
// it is active) gets to hand memory back at random points, as the steps
// of a real run do. It reports per mechanism the median, the 90th
// percentile and the largest window, and how many windows were slow
// (over twice the median of all windows): the protocol wants none.
//
// SEALBENCH_BENCH_DIR chooses the filesystem (default the temporary
// directory; make bench-protocol runs it on the disk and on a tmpfs).
func BenchmarkPrefault(b *testing.B) {
	if _, err := exec.LookPath("dash"); err != nil {
		testenv.Skip(b, "needs dash to run the barrier as the Sandbox does: %v", err)
	}
	root := os.Getenv("SEALBENCH_BENCH_DIR")
	if root == "" {
		root = os.TempDir()
	}
	dir, err := os.MkdirTemp(root, "prefault-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	mechanisms := []struct {
		name string
		pf   func(d string) prefault
	}{
		{"none", func(string) prefault { return prefault{} }},
		{"anon", func(d string) prefault { return prefault{dir: d, bytes: 160 << 20, anon: true} }},
		{"file", func(d string) prefault { return prefault{dir: d, bytes: 160 << 20} }},
	}
	windows := make([][]time.Duration, len(mechanisms))
	prefaults := make([][]time.Duration, len(mechanisms))
	rng := rand.New(rand.NewPCG(7, 7))
	dd := func(path string) string { return "dd if=/dev/zero of=" + path + " bs=1M count=64 2>/dev/null" }
	sh := func(script string) []byte {
		out, err := exec.Command("dash", "-c", script).CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %v: %s", script, err, out)
		}
		return out
	}
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		for k := range mechanisms {
			i := (round + k) % len(mechanisms)
			m := mechanisms[i]
			side := filepath.Join(dir, fmt.Sprintf("r%d-%s", round, m.name))
			warm, win, pfDir := side+"-warm", side+"-window", side+"-prefault"
			sh("mkdir -p " + warm + " " + win + " " + pfDir + " && " + dd(warm+"/out.bin") + " && rm -rf " + warm + " && " + dd(side+"-commit.bin"))
			out := sh("cd " + win + " && " + writeBack.timed(dd("out.bin"), m.pf(pfDir)))
			tm, err := parseTimed(out)
			if err != nil || tm.rc != 0 {
				b.Fatalf("%s: %+v %v", m.name, tm, err)
			}
			windows[i] = append(windows[i], time.Duration(tm.commandNs))
			prefaults[i] = append(prefaults[i], time.Duration(tm.barrier.PrefaultNs))
		}
		b.StopTimer()
		sh("rm -rf " + dir + "/r*")
		time.Sleep(time.Duration(rng.Int64N(int64(4 * time.Second))))
		b.StartTimer()
	}
	b.StopTimer()
	all := slices.Concat(windows...)
	median := testenv.Quantile(all, 0.5)
	var lines []string
	for i, m := range mechanisms {
		slow := 0
		for _, w := range windows[i] {
			if w > 2*median {
				slow++
			}
		}
		b.ReportMetric(testenv.Millis(testenv.Quantile(windows[i], 0.5)), m.name+"-ms")
		b.ReportMetric(float64(slow), m.name+"-slow")
		lines = append(lines, fmt.Sprintf("%-5s window median %6.1f ms, p90 %6.1f ms, max %6.1f ms, slow %d of %d; prefault median %6.1f ms",
			m.name, testenv.Millis(testenv.Quantile(windows[i], 0.5)), testenv.Millis(testenv.Quantile(windows[i], 0.9)),
			testenv.Millis(slices.Max(windows[i])), slow, len(windows[i]), testenv.Millis(testenv.Quantile(prefaults[i], 0.5))))
	}
	b.Logf("64 MiB windows in %s (slow: over twice the median of all, %.1f ms):\n%s", root, testenv.Millis(median), strings.Join(lines, "\n"))
}
