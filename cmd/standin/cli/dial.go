//go:build linux

package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
)

// newDial is `standin dial --socket PATH`: stdin to the socket, the socket
// to stdout. The microsandbox target reaches the stand-in inside a microVM
// this way, through `msb exec ... -- standin dial`, since msb cannot
// publish a guest socket to the host.
func newDial(g *global) *cobra.Command {
	var socket string
	c := &cobra.Command{
		Use:    "dial --socket PATH",
		Short:  "Connect stdin and stdout to a unix socket (the transport into a microVM)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return dial(socket, os.Stdin, g.stdout)
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the unix socket to connect to")
	c.MarkFlagRequired("socket")
	return c
}

// dial copies in to the socket and the socket to out until the socket's
// side ends; the end of in is passed on as a half-close, so a client may
// stop writing and still read the answer.
func dial(socket string, in io.Reader, out io.Writer) error {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", socket, err)
	}
	defer conn.Close()
	uc := conn.(*net.UnixConn)
	go func() {
		io.Copy(uc, in)
		uc.CloseWrite()
	}()
	if _, err := io.Copy(out, uc); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("reading from %s: %w", socket, err)
	}
	return nil
}
