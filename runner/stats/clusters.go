package stats

import (
	"slices"
	"sort"
)

// ClusterRule is the rule Clusters separates samples by, in words, for a
// report to state where it shows clusters.
const ClusterRule = "sorted, a cell's samples are split where one is at least 25% above its neighbour and that gap is wider than the range of the samples on either side, each side holding at least two samples; each cluster is shown by its median and count"

// Cluster is a run of samples Clusters separated from the others.
type Cluster struct {
	Median float64 `json:"median"`
	N      int     `json:"n"`
}

// Clusters splits xs (positive values: durations, ratios) into separated
// clusters by ClusterRule, recursively, at the widest gap that qualifies
// first, and returns them in ascending order; nil when the samples form
// one cluster (every run of fewer than four samples does). A median of
// samples that fall into two separated groups describes neither group: a
// report shows the clusters instead.
func Clusters(xs []float64) []Cluster {
	s := slices.Clone(xs)
	sort.Float64s(s)
	parts := split(s)
	if len(parts) < 2 {
		return nil
	}
	out := make([]Cluster, len(parts))
	for i, p := range parts {
		out[i] = Cluster{Median: Median(p), N: len(p)}
	}
	return out
}

// split splits sorted s at its widest qualifying gap, and each side again.
func split(s []float64) [][]float64 {
	best, bestGap := -1, 0.0
	for i := 2; i <= len(s)-2; i++ { // s[:i] and s[i:], two or more each
		lo, hi := s[:i], s[i:]
		gap := hi[0] - lo[len(lo)-1]
		if hi[0] < 1.25*lo[len(lo)-1] || gap <= lo[len(lo)-1]-lo[0] || gap <= hi[len(hi)-1]-hi[0] {
			continue
		}
		if gap > bestGap {
			best, bestGap = i, gap
		}
	}
	if best < 0 {
		return [][]float64{s}
	}
	return append(split(s[:best]), split(s[best:])...)
}
