package sshx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sealbench/sealbench/internal/toolexec"
)

// DialUnix connects to the unix socket remote on the host, through the
// connection (OpenSSH's direct-streamlocal). The host's sshd opens the
// socket as the logged-in user; it refuses when its configuration says
// AllowStreamLocalForwarding no, or AllowTcpForwarding no (which OpenSSH
// applies to socket paths too): DialCommand is the way there.
func (c *Client) DialUnix(ctx context.Context, remote string) (net.Conn, error) {
	if err := c.alive(); err != nil {
		return nil, err
	}
	conn, err := c.conn.DialContext(ctx, "unix", remote)
	if err != nil {
		if aerr := c.alive(); aerr != nil {
			return nil, aerr
		}
		return nil, fmt.Errorf("connecting to %s on %s: %w (the socket must exist and be open to %s, and the host's sshd must allow streamlocal forwarding)",
			remote, c.cfg.String(), err, c.cfg.User)
	}
	return conn, nil
}

// IsRefused reports whether err is the host's sshd refusing to open a
// channel, the connection itself being fine. OpenSSH answers "connect
// failed" both for a socket it cannot open and for a configuration that
// forbids forwarding (AllowStreamLocalForwarding no, AllowTcpForwarding
// no), so the two look alike: where it matters, try DialCommand.
func IsRefused(err error) bool {
	var oce *ssh.OpenChannelError
	return errors.As(err, &oce)
}

// Forward is a local unix socket whose every connection is carried to
// the host: to a unix socket there (ForwardUnix), or to a command's stdin
// and stdout (Forward with DialCommand). Close it when done.
type Forward struct {
	c             *Client
	ctx           context.Context // ends with Close: no dial outlives the forward
	cancel        context.CancelFunc
	dial          func(context.Context) (net.Conn, error)
	local, remote string
	ln            net.Listener
	mu            sync.Mutex
	conns         map[net.Conn]bool
	closed        bool
	wg            sync.WaitGroup
}

// ForwardUnix listens on the unix socket local and carries each
// connection to the unix socket remote on the host (DialUnix); see Forward.
func (c *Client) ForwardUnix(ctx context.Context, local, remote string) (*Forward, error) {
	return c.Forward(ctx, local, remote, func(ctx context.Context) (net.Conn, error) { return c.DialUnix(ctx, remote) })
}

// ForwardUnixOrCommand is ForwardUnix, or, where the host's sshd opens
// no channel to remote (it forwards no sockets: AllowTcpForwarding no),
// Forward with DialCommand(argv...), a command there that carries each
// connection to the socket over its stdin and stdout (`docker system
// dial-stdio`, `standin dial --socket SOCKET`). OpenSSH refuses alike a
// socket it cannot open and forwarding it does not allow, so the command
// says why when it cannot connect either.
func (c *Client) ForwardUnixOrCommand(ctx context.Context, local, remote string, argv ...string) (*Forward, error) {
	dial := func(ctx context.Context) (net.Conn, error) { return c.DialUnix(ctx, remote) }
	if probe, err := dial(ctx); IsRefused(err) {
		dial = func(ctx context.Context) (net.Conn, error) { return c.DialCommand(ctx, argv...) }
	} else if err != nil {
		return nil, err
	} else {
		probe.Close()
	}
	return c.Forward(ctx, local, remote, dial)
}

// Forward listens on the unix socket local (mode 0600; its directory must
// exist and be mode 0700, so that only this user reaches the host through
// it) and carries each connection to the one dial makes on the host
// (remote names it, for messages). A connection dial fails is closed at
// once, and logged.
func (c *Client) Forward(ctx context.Context, local, remote string, dial func(context.Context) (net.Conn, error)) (*Forward, error) {
	if err := c.alive(); err != nil {
		return nil, err
	}
	dir := filepath.Dir(local)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("forwarding %s on %s to %s: %w", remote, c.cfg.String(), local, err)
	}
	if fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		return nil, fmt.Errorf("forwarding %s on %s to %s: %s is mode %s, not a directory of mode 0700: anyone who reaches the socket reaches the host's", remote, c.cfg.String(), local, dir, fi.Mode())
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", local)
	if err != nil {
		return nil, fmt.Errorf("forwarding %s on %s: %w", remote, c.cfg.String(), err)
	}
	if err := os.Chmod(local, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &Forward{c: c, ctx: fctx, cancel: cancel, dial: dial, local: local, remote: remote, ln: ln, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Local is the local socket's path; Endpoint is it as an Engine endpoint.
func (f *Forward) Local() string    { return f.local }
func (f *Forward) Endpoint() string { return "unix://" + f.local }

func (f *Forward) serve() {
	defer f.wg.Done()
	for {
		lconn, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(lconn, true) {
			lconn.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.track(lconn, false)
			defer lconn.Close()
			rconn, err := f.dial(f.ctx)
			if err != nil {
				f.c.cfg.Log("ssh %s: forwarding %s to %s: %v", f.c.cfg.String(), f.local, f.remote, err)
				return
			}
			if !f.track(rconn, true) {
				rconn.Close()
				return
			}
			defer f.track(rconn, false)
			defer rconn.Close()
			splice(lconn, rconn)
		}()
	}
}

// track adds or removes conn from the open connections; adding fails
// once the forward is closed.
func (f *Forward) track(conn net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !add {
		delete(f.conns, conn)
		return true
	}
	if f.closed {
		return false
	}
	f.conns[conn] = true
	return true
}

// splice copies both ways until both sides are done, passing each
// side's end of writing on as a half-close.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	one := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go one(a, b)
	go one(b, a)
	wg.Wait()
}

// Close stops listening, removes the local socket and closes every
// connection carried.
func (f *Forward) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.cancel()
	for conn := range f.conns {
		conn.Close()
	}
	f.mu.Unlock()
	err := f.ln.Close() // a unix listener removes its socket file
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// DialCommand runs argv on the host and returns a connection over its
// stdin and stdout: the way the docker CLI reaches a remote Engine
// (`docker system dial-stdio`), and the way to reach a unix socket where
// sshd refuses streamlocal forwarding (`standin dial SOCKET`, `sudo -n
// standin dial SOCKET` for a socket only root may open). It returns
// once the command's shell has started. CloseWrite closes its stdin;
// Close ends the command (its process group is killed) and the session.
// Deadlines are not supported: the command's lifetime bounds it.
func (c *Client) DialCommand(ctx context.Context, argv ...string) (net.Conn, error) {
	if len(argv) == 0 {
		return nil, errors.New("dialing a command over ssh: no command")
	}
	if err := c.alive(); err != nil {
		return nil, err
	}
	fail := func(err error) error {
		return &CommandError{Args: argv, Host: c.cfg.String(), ExitCode: -1, Err: err}
	}
	s, err := c.newSession(ctx)
	if err != nil {
		return nil, fail(err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, fail(err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, fail(err)
	}
	cc := &cmdConn{c: c, s: s, stdin: stdin, stdout: bufio.NewReader(stdout), argv: argv}
	s.Stderr = &cc.stderr
	c.cfg.Log("ssh %s: dialing %s", c.cfg.String(), toolexec.Quote(argv))
	if err := s.Start("echo $$ && exec " + toolexec.Quote(argv)); err != nil {
		s.Close()
		return nil, fail(fmt.Errorf("starting it: %w", err))
	}
	// The first line is the shell's pid (see Exec), within ctx.
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := cc.stdout.ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			s.Close()
			return nil, fail(fmt.Errorf("it ended before it started: %w: %s", r.err, strings.TrimSpace(cc.stderr.String())))
		}
		cc.pgid, _ = strconv.Atoi(strings.TrimSpace(r.line))
	case <-ctx.Done():
		s.Close()
		return nil, fail(ctx.Err())
	}
	return cc, nil
}

// cmdConn is a command's stdin and stdout as a net.Conn.
type cmdConn struct {
	c      *Client
	s      *ssh.Session
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr lockedBuffer
	argv   []string
	pgid   int
	once   sync.Once
}

func (cc *cmdConn) Read(b []byte) (int, error)  { return cc.stdout.Read(b) }
func (cc *cmdConn) Write(b []byte) (int, error) { return cc.stdin.Write(b) }
func (cc *cmdConn) CloseWrite() error           { return cc.stdin.Close() }

func (cc *cmdConn) Close() error {
	cc.once.Do(func() {
		cc.stdin.Close()
		cc.s.Signal(ssh.SIGKILL)
		if cc.pgid > 1 && cc.c.alive() == nil {
			cc.c.killGroup(cc.pgid)
		}
		cc.s.Close()
		if msg := strings.TrimSpace(cc.stderr.String()); msg != "" {
			cc.c.cfg.Log("ssh %s: %s said: %s", cc.c.cfg.String(), toolexec.Quote(cc.argv), msg)
		}
	})
	return nil
}

func (cc *cmdConn) LocalAddr() net.Addr { return cmdAddr("local") }
func (cc *cmdConn) RemoteAddr() net.Addr {
	return cmdAddr(cc.c.cfg.String() + " " + toolexec.Quote(cc.argv))
}

// ErrNoDeadlines is what a DialCommand connection answers to deadlines.
var ErrNoDeadlines = fmt.Errorf("a command's stdin and stdout take no deadlines: %w", errors.ErrUnsupported)

func (cc *cmdConn) SetDeadline(time.Time) error      { return ErrNoDeadlines }
func (cc *cmdConn) SetReadDeadline(time.Time) error  { return ErrNoDeadlines }
func (cc *cmdConn) SetWriteDeadline(time.Time) error { return ErrNoDeadlines }

type cmdAddr string

func (a cmdAddr) Network() string { return "ssh-command" }
func (a cmdAddr) String() string  { return string(a) }

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil // enough to say what went wrong
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
