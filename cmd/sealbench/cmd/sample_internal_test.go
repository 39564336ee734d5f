package cmd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestStopOnEOF: the runner's context lives while its stdin is open,
// whatever comes through it, and ends, saying why, when it reaches EOF.
func TestStopOnEOF(t *testing.T) {
	r, w := io.Pipe()
	ctx := stopOnEOF(context.Background(), r)
	if _, err := w.Write([]byte("anything\n")); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("the context ended while stdin was open: %v", err)
	}
	w.Close()
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the context did not end at stdin's EOF")
	}
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "stdin closed") {
		t.Errorf("cause %v: want it to say stdin closed", cause)
	}
}
