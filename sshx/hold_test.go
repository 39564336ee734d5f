package sshx_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestHoldKeepsStdinOpenAndStderrComesAsItIs: a command with Hold reads
// a stdin that stays open until Hold closes, and what it writes on
// stderr reaches Stderr before it ends.
func TestHoldKeepsStdinOpenAndStderrComesAsItIs(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	hold := make(chan struct{})
	said := make(chan string, 1)
	w := writerFunc(func(b []byte) (int, error) {
		select {
		case said <- string(b):
		default:
		}
		return len(b), nil
	})
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := c.Exec(context.Background(), sshx.Command{Argv: []string{"sh", "-c", `echo started >&2; cat; echo "stdin ended"`}, Hold: hold, Stderr: w, Timeout: time.Minute})
		done <- result{out, err}
	}()
	select {
	case s := <-said:
		if !strings.Contains(s, "started") {
			t.Fatalf("stderr said %q", s)
		}
	case r := <-done:
		t.Fatalf("the command ended before Hold closed: %q, %v", r.out, r.err)
	}
	close(hold)
	r := <-done
	if r.err != nil || string(r.out) != "stdin ended\n" {
		t.Fatalf("after Hold closed: %q, %v", r.out, r.err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestFetchFile: a file comes back as it is there; one that is not there
// is no file, not an error.
func TestFetchFile(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	dir := t.TempDir()
	want := bytes.Repeat([]byte("sample\n"), 1000)
	p := filepath.Join(dir, "samples.jsonl")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.FetchFile(context.Background(), p)
	if err != nil || !ok || !bytes.Equal(got, want) {
		t.Fatalf("FetchFile: %d bytes, %v, %v", len(got), ok, err)
	}
	if got, ok, err := c.FetchFile(context.Background(), filepath.Join(dir, "none")); err != nil || ok || got != nil {
		t.Fatalf("FetchFile of no file: %q, %v, %v", got, ok, err)
	}
	if _, _, err := c.FetchFile(context.Background(), "relative"); err == nil {
		t.Fatal("FetchFile of a relative path: no error")
	}
}
