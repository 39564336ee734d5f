package microsandbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sealbench/sealbench/internal/sockpath"
)

// ProxyConfig says what the Engine proxy serves and how it reaches the
// stand-in: every connection to Socket runs
//
//	<Tool> exec <Name> --stream -- <Standin> dial --socket <GuestSocket>
//
// with the connection itself as that command's stdin and stdout; --stream
// forwards them as they come, both ways (see the package comment).
type ProxyConfig struct {
	Socket      string // the host socket to serve (its directory must exist, 0700)
	Tool        string // the msb binary, absolute
	Name        string // the sandbox
	Standin     string // the stand-in's path inside the sandbox
	GuestSocket string // the stand-in's socket inside the sandbox
}

// Args renders c as the flags ParseProxyArgs reads.
func (c ProxyConfig) Args() []string {
	return []string{"--socket", c.Socket, "--tool", c.Tool, "--name", c.Name, "--standin", c.Standin, "--guest-socket", c.GuestSocket}
}

// ParseProxyArgs reads the flags Args writes, checking that none is
// missing.
func ParseProxyArgs(args []string) (ProxyConfig, error) {
	var c ProxyConfig
	fs := flag.NewFlagSet("msb-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Socket, "socket", "", "")
	fs.StringVar(&c.Tool, "tool", "", "")
	fs.StringVar(&c.Name, "name", "", "")
	fs.StringVar(&c.Standin, "standin", "", "")
	fs.StringVar(&c.GuestSocket, "guest-socket", "", "")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("msb proxy: %w", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("msb proxy: unexpected argument %q", fs.Arg(0))
	}
	var missing []string
	for n, v := range map[string]string{"--socket": c.Socket, "--tool": c.Tool, "--name": c.Name, "--standin": c.Standin, "--guest-socket": c.GuestSocket} {
		if v == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("msb proxy: missing %v", missing)
	}
	if !filepath.IsAbs(c.Socket) || !filepath.IsAbs(c.Tool) {
		return c, errors.New("msb proxy: --socket and --tool must be absolute paths")
	}
	return c, nil
}

// ServeProxy serves c.Socket until ctx ends, then stops every connection's
// `msb exec` and removes the socket. It is what the hidden `sealbench
// msb-proxy` command runs, in the background, for the microsandbox target;
// logf (nil: discard) gets a line per connection that fails.
func ServeProxy(ctx context.Context, c ProxyConfig, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ln, err := sockpath.ListenPrivate("msb proxy", c.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(c.Socket)
	var wg sync.WaitGroup
	defer wg.Wait()
	err = sockpath.Serve(ctx, ln, nil, func(conn net.Conn) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.forward(ctx, conn.(*net.UnixConn)); err != nil {
				logf("msb proxy: %v", err)
			}
		}()
	})
	if err != nil {
		return fmt.Errorf("msb proxy: accepting on %s: %w", c.Socket, err)
	}
	return nil
}

// execArgs are the arguments of the `msb exec` that carries one
// connection.
func (c ProxyConfig) execArgs() []string {
	return []string{"exec", c.Name, "--stream", "--", c.Standin, "dial", "--socket", c.GuestSocket}
}

// forward hands the connection to one `msb exec`, as its stdin and
// stdout: the bytes go straight between the socket and the tool.
func (c ProxyConfig) forward(ctx context.Context, conn *net.UnixConn) error {
	defer conn.Close()
	f, err := conn.File() // a duplicate: the child gets its own descriptor
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, c.Tool, c.execArgs()...)
	cmd.Stdin, cmd.Stdout = f, f
	var stderr limited
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s exec: %w", c.Tool, err)
	}
	// The child holds the connection now; ours close, so that the
	// connection ends when the child does.
	f.Close()
	conn.Close()
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("`%s %s`: %v: %s", c.Tool, strings.Join(c.execArgs(), " "), err, stderr.String())
	}
	return nil
}

// limited keeps the first 4 KiB written to it.
type limited struct{ b []byte }

func (l *limited) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limited) String() string { return string(l.b) }
