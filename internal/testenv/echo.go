package testenv

import (
	"io"
	"net"
	"testing"
)

// EchoSocket serves the unix socket sock until the test ends: it answers
// each connection, once the client has half-closed it, with "got:" and
// what it sent. It returns the listener, for a test that closes it early.
func EchoSocket(t testing.TB, sock string) net.Listener {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the half-close
				c.Write(append([]byte("got:"), b...))
			}()
		}
	}()
	return ln
}
