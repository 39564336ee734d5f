//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/muxlink"
)

// newMux is `standin mux --port DEV --socket PATH`: the guest end of the
// qemu target's link. The host opens a yamux stream (internal/muxlink)
// over the virtio-serial port DEV for each Engine API connection; each is
// joined to the stand-in's socket.
func newMux(g *global) *cobra.Command {
	var port, socket string
	c := &cobra.Command{
		Use:    "mux --port DEV --socket PATH",
		Short:  "Serve Engine connections multiplexed over a serial port (the link into a QEMU VM)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveMux(cmd.Context(), port, socket, g.stderr)
		},
	}
	c.Flags().StringVar(&port, "port", "", "the serial port's device (/dev/virtio-ports/NAME)")
	c.Flags().StringVar(&socket, "socket", "", "the stand-in's unix socket")
	c.MarkFlagRequired("port")
	c.MarkFlagRequired("socket")
	return c
}

// serveMux serves sessions on the port, one after another, until ctx
// ends. The port stays open all along: a virtio-serial port reads as
// ended while no host end is connected, and closing it would drop what
// the host sent meanwhile, so an end of input is waited out (port).
func serveMux(ctx context.Context, dev, socket string, logw io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening the serial port: %w", err)
	}
	defer f.Close()
	for ctx.Err() == nil {
		if err := serveSession(port{f}, socket, logw); err != nil {
			fmt.Fprintf(logw, "mux: %v\n", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return ctx.Err()
}

// port is a serial port whose reads wait while the host end is away.
type port struct{ f *os.File }

func (p port) Read(b []byte) (int, error) {
	for {
		n, err := p.f.Read(b)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p port) Write(b []byte) (int, error) { return p.f.Write(b) }

// Close leaves the port open for the next session.
func (p port) Close() error { return nil }

// serveSession serves one yamux session on f until it ends.
func serveSession(f io.ReadWriteCloser, socket string, logw io.Writer) error {
	sess, err := yamux.Server(f, muxlink.Config(logw))
	if err != nil {
		return err
	}
	defer sess.Close()
	for {
		s, err := sess.AcceptStream()
		if err != nil {
			if muxlink.ErrClosed(err) {
				return nil
			}
			return err
		}
		go func() {
			c, err := net.DialTimeout("unix", socket, 30*time.Second)
			if err != nil {
				fmt.Fprintf(logw, "mux: connecting to the stand-in: %v\n", err)
				s.Close()
				return
			}
			muxlink.Join(s, c.(*net.UnixConn))
		}()
	}
}
