//go:build linux

package kubetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// The test binary's one cluster, started by the first test that asks.
var shared struct {
	sync.Mutex
	started bool
	c       *Cluster
	err     error
}

// Shared returns the test binary's cluster, starting it for the first
// test that asks; the binary's TestMain stops it (Main). It skips, with
// the reason, when not root or when a tool is missing, and fails the test
// when the cluster did not start (every later test fails with the same
// error, without trying again).
func Shared(t testing.TB) *Cluster {
	t.Helper()
	testenv.NeedRoot(t)
	tools, err := FindTools()
	if err != nil {
		testenv.Skip(t, "%v", err)
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.started {
		shared.started = true
		shared.c, shared.err = Start(context.Background(), tools)
		if shared.err == nil {
			fmt.Fprintf(os.Stderr, "kubetest: cluster started in %s (%s, kubeconfig %s)\n",
				shared.c.Started.Round(1e6), shared.c.Dir, shared.c.Kubeconfig)
		}
	}
	if shared.err != nil {
		t.Fatalf("starting the Kubernetes test cluster: %v", shared.err)
	}
	return shared.c
}

// Main runs the tests and then stops the shared cluster, if one started:
// `func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }`. It fails
// the binary when Stop leaves anything behind, naming what.
func Main(m *testing.M) int {
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.c == nil {
		return code
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "kubetest: a test failed; the cluster's logs:%s\n", shared.c.logTails())
	}
	err := shared.c.Stop()
	fmt.Fprintf(os.Stderr, "kubetest: cluster stopped in %s\n", shared.c.Stopped.Round(1e6))
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: stopping the Kubernetes test cluster: %v\n", err)
		return 1
	}
	return code
}
