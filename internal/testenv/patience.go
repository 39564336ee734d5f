package testenv

import (
	"context"
	"testing"
	"time"
)

// Patience is how long a test waits for something that should happen at
// once (a process to exit, a socket to appear, a callback to run) before it
// calls it hung. It is a hang detector, never a claim about speed: a test
// never asserts how fast anything is (benchmarks measure that), and on a
// 2-core machine running two test binaries beside a VM, "at once" can take
// seconds. Polls wait up to Patience; the error says what did not happen.
const Patience = 2 * time.Minute

// Eventually polls cond every interval until it holds, and fails t with
// what (what was awaited) when it has not after Patience.
func Eventually(t testing.TB, what string, interval time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v", what, Patience)
		}
		time.Sleep(interval)
	}
}

// PatientContext is a context that ends after Patience, for a test that
// waits on something that should answer at once.
func PatientContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	t.Cleanup(cancel)
	return ctx
}
