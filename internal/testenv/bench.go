package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// DockerClient is a client of the dockerd at $DOCKER_HOST (scripts/dockerd
// starts one), closed when tb ends; it skips when none answers. Benchmarks
// compare with dockerd through it.
func DockerClient(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	if _, err := cli.Ping(context.Background()); err != nil {
		Skip(tb, "needs a dockerd at $DOCKER_HOST to compare with (scripts/dockerd start): %v", err)
	}
	return cli
}

// Quantile is the p-quantile of d by nearest rank (0.5: the median); d is
// left as it is.
func Quantile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

// Millis is d in milliseconds, as benchmarks report it.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
