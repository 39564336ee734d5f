package qemu_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sealbench/sealbench/internal/muxlink"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/provision/qemu"
)

// TestLinkCarriesHalfClosedConnections stands QEMU's serial socket and
// the guest's `standin mux` in with a yamux server joined to an echo
// server, and checks that the link serves many connections at once over
// the one stream, each half-closed by its client and still answered, and
// that it stops, removing its socket, when the VM's end goes.
func TestLinkCarriesHalfClosedConnections(t *testing.T) {
	dir := testenv.ShortTempDir(t, "ql")
	serial, engineSock, standin := filepath.Join(dir, "serial.sock"), filepath.Join(dir, "engine.sock"), filepath.Join(dir, "standin.sock")
	testenv.EchoSocket(t, standin)
	qemuEnd, err := net.Listen("unix", serial)
	if err != nil {
		t.Fatal(err)
	}
	defer qemuEnd.Close()
	guest := make(chan net.Conn, 1)
	go func() {
		c, err := qemuEnd.Accept() // QEMU takes one connection at a time
		if err != nil {
			return
		}
		guest <- c
		sess, err := yamux.Server(c, muxlink.Config(io.Discard))
		if err != nil {
			return
		}
		for {
			s, err := sess.AcceptStream()
			if err != nil {
				return
			}
			go func() {
				c, err := net.Dial("unix", standin)
				if err != nil {
					s.Close()
					return
				}
				muxlink.Join(s, c.(*net.UnixConn))
			}()
		}
	}()

	served := make(chan error, 1)
	go func() {
		served <- qemu.ServeLink(context.Background(), qemu.LinkConfig{Socket: engineSock, Serial: serial}, t.Logf)
	}()
	testenv.Eventually(t, "the link's Engine socket", 20*time.Millisecond, func() bool { _, err := os.Stat(engineSock); return err == nil })
	if fi, err := os.Stat(engineSock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the Engine socket: %v %v, want mode 0600", fi, err)
	}

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", engineSock)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			msg := fmt.Sprintf("hello %d %s", i, strings.Repeat("x", i*10000))
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Error(err)
				return
			}
			c.(*net.UnixConn).CloseWrite()
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "got:"+msg {
				t.Errorf("connection %d: %d bytes back (%v), want %d", i, len(got), err, len(msg)+4)
			}
		}()
	}
	wg.Wait()

	// QEMU exits: the link ends and takes its socket with it.
	(<-guest).Close()
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("ServeLink after the VM's end went: %v", err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("ServeLink goes on after the VM's end went")
	}
	if _, err := os.Stat(engineSock); !os.IsNotExist(err) {
		t.Errorf("the Engine socket is still there: %v", err)
	}
}

func TestParseLinkArgs(t *testing.T) {
	c := qemu.LinkConfig{Socket: "/r/qemu/sock/engine.sock", Serial: "/r/qemu/sock/serial.sock"}
	got, err := qemu.ParseLinkArgs(c.Args())
	if err != nil || got != c {
		t.Errorf("ParseLinkArgs(Args()) = %+v, %v", got, err)
	}
	for _, bad := range [][]string{{}, {"--socket", "rel.sock", "--serial", "/s"}, {"--socket", "/a", "--serial", "/b", "extra"}, {"--bogus", "x"}} {
		if _, err := qemu.ParseLinkArgs(bad); err == nil {
			t.Errorf("ParseLinkArgs(%q) accepted", bad)
		}
	}
}
