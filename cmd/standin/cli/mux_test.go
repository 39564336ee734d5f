//go:build linux

package cli

import (
	"io"
	"net"
	"os"
	"testing"

	"github.com/hashicorp/yamux"

	"github.com/sealbench/sealbench/internal/muxlink"
)

// TestMuxJoinsStreamsToTheSocket is the guest's end of the qemu target's
// link: each yamux stream the host opens over the port reaches the
// stand-in's socket, half-closes pass through, and a stream whose socket
// cannot be reached is closed without ending the session.
func TestMuxJoinsStreamsToTheSocket(t *testing.T) {
	_, sock, ln := echoSocket(t, "mux")
	host, guest := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- serveSession(guest, sock, io.Discard) }()
	sess, err := yamux.Client(host, muxlink.Config(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"hello", "again"} {
		s, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte(msg))
		s.Close() // the FIN only: the answer still comes
		got, err := io.ReadAll(s)
		if err != nil || string(got) != "got:"+msg {
			t.Errorf("stream answered %q (%v), want %q", got, err, "got:"+msg)
		}
	}
	ln.Close()
	os.Remove(sock)
	s, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(s); len(got) != 0 {
		t.Errorf("a stream with no stand-in answered %q", got)
	}
	sess.Close()
	host.Close()
	if err := <-done; err != nil {
		t.Errorf("serveSession after the host went: %v", err)
	}
}
