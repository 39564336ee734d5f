//go:build linux

package layerfs

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// Histogram buckets for request times: 250 ns wide up to 64 µs, then one per
// power of two.
const (
	histLinear  = 256
	histStep    = 250 // ns
	histBuckets = histLinear + 48
)

type opStat struct {
	count atomic.Int64
	nanos atomic.Int64
	hist  [histBuckets]atomic.Int64
}

// telemetry is what a Workspace counts while it serves.
type telemetry struct {
	ops [opCount]opStat

	copyUps     atomic.Int64
	lazyCopyUps atomic.Int64
	// clonedCopyUps shared the blob's extents (FICLONE) instead of copying.
	clonedCopyUps atomic.Int64
	copyUpBytes   atomic.Int64
	writesBehind  atomic.Int64
	whiteouts     atomic.Int64
	opaqueDirs    atomic.Int64
}

func bucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	if ns < histLinear*histStep {
		return int(ns / histStep)
	}
	b := histLinear + bits.Len64(uint64(ns)/(histLinear*histStep)) - 1
	if b >= histBuckets {
		b = histBuckets - 1
	}
	return b
}

// bucketMid returns a representative time for a bucket.
func bucketMid(b int) time.Duration {
	if b < histLinear {
		return time.Duration(b*histStep + histStep/2)
	}
	lo := int64(histLinear*histStep) << (b - histLinear)
	return time.Duration(lo + lo/2)
}

func (t *telemetry) record(op opcode, t0 time.Time) {
	ns := time.Since(t0).Nanoseconds()
	s := &t.ops[op]
	s.count.Add(1)
	s.nanos.Add(ns)
	s.hist[bucketOf(ns)].Add(1)
}

// OpStats is what telemetry says about one kind of FUSE request.
type OpStats = daemonapi.OpStats

func median(h *[histBuckets]int64, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	var cum int64
	for b, c := range h {
		cum += c
		if cum*2 >= n {
			return bucketMid(b)
		}
	}
	return 0
}

// snapshot returns per-opcode counts (only opcodes seen) and the median over
// every request.
func (t *telemetry) snapshot() (map[string]OpStats, OpStats) {
	out := map[string]OpStats{}
	var all [histBuckets]int64
	var total OpStats
	for op := range t.ops {
		s := &t.ops[op]
		n := s.count.Load()
		if n == 0 {
			continue
		}
		var h [histBuckets]int64
		for b := range h {
			h[b] = s.hist[b].Load()
			all[b] += h[b]
		}
		st := OpStats{Count: n, TotalNs: s.nanos.Load(), MedianNs: int64(median(&h, n))}
		out[opNames[op]] = st
		total.Count += n
		total.TotalNs += st.TotalNs
	}
	total.MedianNs = int64(median(&all, total.Count))
	return out, total
}
