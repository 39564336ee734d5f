//go:build linux

package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestDial: stdin reaches the socket, its end is passed on as a
// half-close, and the answer written after it comes back on stdout.
func TestDial(t *testing.T) {
	dir, sock, _ := echoSocket(t, "dial")
	var out bytes.Buffer
	if err := dial(sock, strings.NewReader("hello"), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "got:hello" {
		t.Errorf("dial answered %q, want %q", out.String(), "got:hello")
	}
	code, _, errOut := run("dial", "--socket", filepath.Join(dir, "missing.sock"))
	if code == 0 || !strings.Contains(errOut, "missing.sock") {
		t.Errorf("dial to a missing socket: exit %d, %q", code, errOut)
	}
}

// echoSocket serves testenv.EchoSocket in a short temporary directory (a
// socket path must fit in 108 bytes: t.TempDir's may not). It returns the
// directory, the socket's path and its listener.
func echoSocket(t *testing.T, name string) (dir, sock string, ln net.Listener) {
	t.Helper()
	dir, err := os.MkdirTemp("", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "s.sock")
	return dir, sock, testenv.EchoSocket(t, sock)
}
