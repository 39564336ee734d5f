package kubeengine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A log read right after the exit may still be missing output: it is read
// again until two reads agree, and not past the exit plus the settle.
func TestSettledLog(t *testing.T) {
	ctx := context.Background()
	reads := func(logs ...string) (func(context.Context) ([]byte, error), *int) {
		n := 0
		return func(context.Context) ([]byte, error) {
			i := min(n, len(logs)-1)
			n++
			return []byte(logs[i]), nil
		}, &n
	}
	now := time.Now()

	read, n := reads("", "ok\n", "ok\n", "ok\n")
	b, err := settledLog(ctx, read, logSettled(now, time.Minute), time.Now)
	if err != nil || string(b) != "ok\n" {
		t.Errorf("just exited, empty then printed: got %q, %v; want the printed log", b, err)
	}
	if *n != 3 {
		t.Errorf("read %d times, want 3 (empty, then twice the same)", *n)
	}

	read, n = reads("ok\n", "ok\nmore\n", "ok\nmore\n")
	if b, _ := settledLog(ctx, read, logSettled(now, time.Minute), time.Now); string(b) != "ok\nmore\n" {
		t.Errorf("just exited, a partial log: got %q, want the whole", b)
	}

	read, n = reads("", "ok\n")
	if b, _ := settledLog(ctx, read, logSettled(now.Add(-time.Hour), time.Second), time.Now); string(b) != "" || *n != 1 {
		t.Errorf("exited long ago: got %q after %d reads, want the one read as it was", b, *n)
	}

	// An empty log stays empty: read until the settle has passed, on a
	// clock that the reads move on.
	clock := now
	read, n = reads("")
	slow := func(ctx context.Context) ([]byte, error) { clock = clock.Add(time.Second); return read(ctx) }
	if b, err := settledLog(ctx, slow, logSettled(now, 2*time.Second), func() time.Time { return clock }); err != nil || len(b) != 0 || *n != 3 {
		t.Errorf("an empty log: got %q, %v after %d reads, want empty after 3 (the exit plus 2 s and the second it is rounded to)", b, err, *n)
	}

	boom := errors.New("kubelet unreachable")
	failing := func(context.Context) ([]byte, error) { return nil, boom }
	if _, err := settledLog(ctx, failing, logSettled(now, time.Minute), time.Now); !errors.Is(err, boom) {
		t.Errorf("a failing read: got %v, want it returned", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	read, _ = reads("")
	if _, err := settledLog(cancelled, read, logSettled(now, time.Minute), time.Now); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled request: got %v, want context.Canceled", err)
	}
}
