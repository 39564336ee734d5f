package qemu

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/sealbench/sealbench/internal/muxlink"
	"github.com/sealbench/sealbench/internal/sockpath"
)

// The guest link: QEMU joins the VM's virtio-serial port GuestPort to the
// unix socket LinkConfig.Serial (QEMU listens; one connection at a time);
// the link process, `sealbench qemu-link` (ServeLink), connects to it once
// and serves the Engine socket on the host, opening a yamux stream
// (internal/muxlink) for each connection. Inside the VM the bundle's
// `standin mux` joins each stream to the stand-in's socket. This file is
// the host's half; it knows nothing of QEMU beyond the socket, and would
// serve a Firecracker VM's vsock the same way.

// LinkSubcommand is the hidden sealbench command that runs ServeLink.
const LinkSubcommand = "qemu-link"

// LinkConfig says what the link serves and what it connects to.
type LinkConfig struct {
	Socket string // the Engine socket to serve on the host (its directory exists, 0700)
	Serial string // the socket QEMU joins to the guest's serial port
}

// Args renders c as the flags ParseLinkArgs reads.
func (c LinkConfig) Args() []string {
	return []string{"--socket", c.Socket, "--serial", c.Serial}
}

// ParseLinkArgs reads the flags Args writes.
func ParseLinkArgs(args []string) (LinkConfig, error) {
	var c LinkConfig
	fs := flag.NewFlagSet(LinkSubcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Socket, "socket", "", "")
	fs.StringVar(&c.Serial, "serial", "", "")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("qemu link: %w", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("qemu link: unexpected argument %q", fs.Arg(0))
	}
	if !filepath.IsAbs(c.Socket) || !filepath.IsAbs(c.Serial) {
		return c, errors.New("qemu link: --socket and --serial must be absolute paths")
	}
	return c, nil
}

// ServeLink connects to c.Serial (waiting up to a minute for QEMU to
// make it) and serves c.Socket until ctx ends or the VM's end of the link
// goes (QEMU exited): then it removes the socket and returns. logf gets a
// line per connection that fails.
func ServeLink(ctx context.Context, c LinkConfig, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	serial, err := dialSerial(ctx, c.Serial, time.Minute)
	if err != nil {
		return err
	}
	sess, err := yamux.Client(serial, muxlink.Config(logWriter(logf)))
	if err != nil {
		serial.Close()
		return err
	}
	defer sess.Close()
	ln, err := sockpath.ListenPrivate("qemu link", c.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(c.Socket)
	err = sockpath.Serve(ctx, ln, sess.CloseChan(), func(conn net.Conn) {
		go func() {
			s, err := sess.OpenStream()
			if err != nil {
				logf("qemu link: opening a stream: %v", err)
				conn.Close()
				return
			}
			muxlink.Join(s, conn.(*net.UnixConn))
		}()
	})
	switch {
	case err == nil:
		return nil
	case sess.IsClosed():
		return fmt.Errorf("qemu link: the VM's end of %s closed (QEMU exited?)", c.Serial)
	default:
		return fmt.Errorf("qemu link: accepting on %s: %w", c.Socket, err)
	}
}

// dialSerial connects to QEMU's socket, waiting up to d for it to appear.
func dialSerial(ctx context.Context, path string, d time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(d)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("qemu link: connecting to QEMU's %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logWriter turns logf into the writer yamux logs to.
type logWriter func(string, ...any)

func (l logWriter) Write(b []byte) (int, error) {
	l("%s", b)
	return len(b), nil
}
