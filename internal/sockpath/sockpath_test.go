package sockpath

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckMatchesTheKernel binds sockets at the limit and one byte past
// it: Check must refuse exactly what bind refuses, or less.
func TestCheckMatchesTheKernel(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{Max, Max + 1, 300} {
		pad := n - len(dir) - 1
		if pad < 1 {
			t.Skipf("temporary directory %q is too long for this test", dir)
		}
		p := filepath.Join(dir, strings.Repeat("s", pad))
		err := Check("socket", p)
		if n <= Max {
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			ln, lerr := net.Listen("unix", p)
			if lerr != nil {
				t.Fatalf("%d bytes: Check passed, bind refused: %v", n, lerr)
			}
			ln.Close()
			continue
		}
		if !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "shorter path") {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
}

func TestListenPrivateReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the socket file stays, as a dead helper leaves it
	ln, err := ListenPrivate("test", path)
	if err != nil {
		t.Fatalf("ListenPrivate over a stale socket: %v", err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v: want mode 0600", fi, err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dialling the new socket: %v", err)
	}
	c.Close()
}

// TestServe hands each connection over, returns nil once ctx ends, and
// the closed listener's error once stop closes.
func TestServe(t *testing.T) {
	for _, byStop := range []bool{false, true} {
		ln, err := ListenPrivate("test", filepath.Join(t.TempDir(), "s.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stop := make(chan struct{})
		got := make(chan net.Conn)
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, ln, stop, func(c net.Conn) { got <- c }) }()
		for range 2 {
			c, err := net.Dial("unix", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			(<-got).Close()
			c.Close()
		}
		if byStop {
			close(stop)
		} else {
			cancel()
		}
		err = <-done
		cancel()
		if byStop != (err != nil) || byStop && !errors.Is(err, net.ErrClosed) {
			t.Errorf("stopped by stop %v: Serve returned %v", byStop, err)
		}
		if _, err := net.Dial("unix", ln.Addr().String()); err == nil {
			t.Errorf("stopped by stop %v: the listener still accepts", byStop)
		}
	}
}
