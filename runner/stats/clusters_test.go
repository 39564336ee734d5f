package stats

import (
	"reflect"
	"testing"
)

func TestClusters(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want []Cluster
	}{
		{"one tight group", []float64{10, 11, 10.5, 12, 11.5, 10.2}, nil},
		{"a spread that is no gap", []float64{10, 13, 16, 20, 25, 31}, nil},
		{"fewer than four", []float64{10, 30, 31}, nil},
		{"one slow sample is kept, not a cluster", []float64{10, 10.5, 11, 10.2, 40}, nil},
		{"two groups", []float64{30, 10, 31, 10.5, 11, 29}, []Cluster{{Median: 10.5, N: 3}, {Median: 30, N: 3}}},
		{"three groups", []float64{1, 1.1, 5, 5.5, 20, 21, 1.05}, []Cluster{{Median: 1.05, N: 3}, {Median: 5.25, N: 2}, {Median: 20.5, N: 2}}},
		{"a gap narrower than a side's range", []float64{1, 1.9, 2.5, 3.3}, nil},
	} {
		if got := Clusters(tc.xs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Clusters(%v) = %+v, want %+v", tc.name, tc.xs, got, tc.want)
		}
	}
}
