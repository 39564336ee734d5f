// Package muxlink carries many stream connections over one byte stream
// with yamux. The qemu target reaches the stand-in inside its VM over one
// virtio-serial port, while the Engine API client opens many connections
// (an exec's attach hijacks its own): the host side (provision/qemu) opens
// a yamux stream per Engine connection, and the stand-in's hidden `mux`
// command, inside the VM, joins each stream to the stand-in's socket.
//
// The stand-in links this package, so it holds nothing of VMs: only the
// session settings both ends must share and the copying of one stream.
package muxlink

import (
	"errors"
	"io"
	"log"
	"net"
	"time"

	"github.com/hashicorp/yamux"
)

// Config is the yamux session's settings, the same at both ends: no
// keep-alives (the guest end writes only in answer, so that nothing it
// writes before the host connects is lost on the port), long write
// timeouts (an emulated guest can stall for seconds), and windows large
// enough for an image load to stream.
func Config(logw io.Writer) *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = false
	c.ConnectionWriteTimeout = 2 * time.Minute
	// No timeout on a stream the guest has not answered yet: the host
	// opens streams while the VM still boots, and a timeout would end the
	// whole session; the Engine client gives up on its own.
	c.StreamOpenTimeout = 0
	c.StreamCloseTimeout = 10 * time.Minute
	c.MaxStreamWindowSize = 4 << 20
	c.LogOutput = nil
	c.Logger = log.New(logw, "yamux: ", log.LstdFlags)
	return c
}

// Join copies between a yamux stream and a unix connection until both
// directions end, then closes both. The end of one side's data is passed
// on as a half-close (a yamux stream's Close sends only its FIN), so an
// Engine client may stop writing (the exec attach does, after stdin) and
// still read the answer.
func Join(s *yamux.Stream, c *net.UnixConn) {
	done := make(chan struct{}, 2)
	go func() {
		if _, err := io.Copy(c, s); err != nil {
			c.Close() // the client is gone: stop reading for it
		}
		c.CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		io.Copy(s, c)
		s.Close()
		done <- struct{}{}
	}()
	<-done
	<-done
	c.Close()
	s.Close()
}

// ErrClosed reports whether err is a session's or listener's end rather
// than a failure.
func ErrClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, yamux.ErrSessionShutdown)
}
