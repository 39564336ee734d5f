package sockpath

import (
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
