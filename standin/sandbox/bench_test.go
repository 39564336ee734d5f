//go:build linux

package sandbox

import (
	"os"
	"sort"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

// BenchmarkSandboxExec is one exec of /bin/true straight through the init,
// no HTTP: what the stand-in's own exec path costs.
func BenchmarkSandboxExec(b *testing.B) {
	testenv.NeedRoot(b)
	s := testSpec(b, busyboxRoot(b))
	sb := startSandbox(b, s)
	null := devNull(b)
	var walls, cmds []time.Duration
	for i := range b.N + 20 {
		t0 := time.Now()
		p, err := sb.Exec(&Process{Args: []string{"/bin/true"}}, nil, null, null)
		if err != nil {
			b.Fatal(err)
		}
		st, nanos, err := p.Wait()
		if err != nil || st != 0 {
			b.Fatalf("status %d, %v", st, err)
		}
		if i >= 20 {
			walls = append(walls, time.Since(t0))
			cmds = append(cmds, time.Duration(nanos))
		}
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	b.ReportMetric(float64(med(walls))/1e6, "wall-median-ms")
	b.ReportMetric(float64(med(cmds))/1e6, "command-median-ms")
	_ = os.Stdout
}
