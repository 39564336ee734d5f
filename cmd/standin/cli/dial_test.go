//go:build linux

package cli

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDial: stdin reaches the socket, its end is passed on as a
// half-close, and the answer written after it comes back on stdout.
func TestDial(t *testing.T) {
	dir, err := os.MkdirTemp("", "dial")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until the half-close
		c.Write([]byte("got:" + string(b)))
	}()
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
