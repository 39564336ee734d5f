package sshx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sealbench/sealbench/internal/toolexec"
)

// Command is one command to run on the host.
type Command struct {
	// Argv is the command line, quoted for the remote shell here: no
	// argument is ever read by a shell as anything but itself.
	Argv []string
	// Stdin, when not nil, is copied to the command's stdin, which is
	// closed at its end.
	Stdin io.Reader
	// Timeout bounds the command (0: Config.CommandTimeout).
	Timeout time.Duration
	// Name names its logs (NNN-<name>.out); empty: from Argv.
	Name string
	// Hold, when set (Stdin nil), keeps the command's stdin open until
	// Hold is closed or the command ends: a remote runner that stops when
	// its stdin reaches EOF stops when Hold closes or the connection goes.
	Hold <-chan struct{}
	// Stderr, when set, hears the command's stderr as it comes, besides
	// its log (a remote runner's progress lines).
	Stderr io.Writer
}

// CommandError is a remote command that failed: it names the host
// (Host), the command line, how it ended and what it said, and where its
// output is kept.
type CommandError = toolexec.Error

// Run runs argv on the host with the default deadline and returns its stdout.
func (c *Client) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return c.Exec(ctx, Command{Argv: argv})
}

// Exec runs cmd on the host and returns its stdout. A command that exits
// non-zero, is killed, or outlives its deadline is a *CommandError; past
// the deadline (or when ctx ends) the remote process is sent SIGKILL and
// the session closed, and the error wraps the context's error.
func (c *Client) Exec(ctx context.Context, cmd Command) ([]byte, error) {
	if len(cmd.Argv) == 0 {
		return nil, errors.New("running a command over ssh: no command")
	}
	if err := c.alive(); err != nil {
		return nil, err
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = c.cfg.CommandTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fail := func(err error) *CommandError {
		return &CommandError{Args: cmd.Argv, Host: c.cfg.String(), ExitCode: -1, Err: err}
	}
	s, err := c.newSession(ctx)
	if err != nil {
		return nil, fail(err)
	}
	defer s.Close()

	out := toolexec.NewOutput(c.logBase(cmd))
	defer out.Close()
	stdout, stderr := out.Writers()
	pid := &pidWriter{w: stdout}
	if cmd.Stderr != nil {
		stderr = io.MultiWriter(stderr, cmd.Stderr)
	}
	s.Stdout, s.Stderr = pid, stderr
	s.Stdin = cmd.Stdin
	if cmd.Hold != nil && cmd.Stdin == nil {
		// A pipe, not a reader: the session's Wait waits for a reader to
		// end, and this one ends only when Hold closes.
		w, err := s.StdinPipe()
		if err != nil {
			return nil, fail(err)
		}
		finished := make(chan struct{})
		defer close(finished)
		go func() {
			select {
			case <-cmd.Hold:
			case <-finished:
			}
			w.Close()
		}()
	}

	// The login shell says its pid, the session's process group (sshd
	// starts it with setsid), before the command replaces it: a deadline
	// kills that group. sshd refuses the SSH signal request to root's
	// sessions (they run without privilege separation), so it cannot be
	// relied on.
	line := "echo $$ && exec " + toolexec.Quote(cmd.Argv)
	c.cfg.Log("ssh %s: running %s", c.cfg.String(), toolexec.Quote(cmd.Argv))
	if err := s.Start(line); err != nil {
		return nil, fail(fmt.Errorf("starting it: %w", err))
	}
	waited := make(chan error, 1)
	go func() { waited <- s.Wait() }()
	var xe *ssh.ExitError
	var missing *ssh.ExitMissingError
	select {
	case err = <-waited:
		if errors.As(err, &missing) {
			// Torn down without an exit status: most likely the
			// connection is going; if so, say that.
			select {
			case <-c.done:
				err = c.Err()
			case <-time.After(2 * time.Second):
			}
		}
	case <-ctx.Done():
		s.Signal(ssh.SIGKILL)
		if p := pid.Pid(); p > 1 {
			c.killGroup(p)
		}
		s.Close()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
		}
		err = fmt.Errorf("no end within %s: killed (%w)", timeout, ctx.Err())
	case <-c.done:
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
		}
		err = c.Err()
	}
	if err == nil {
		return out.Stdout.Bytes(), nil
	}
	e := fail(err)
	e.Logs = out.Base
	if errors.As(err, &xe) {
		e.ExitCode = xe.ExitStatus()
		e.Err = fmt.Errorf("exit status %d", e.ExitCode)
		if sig := xe.Signal(); sig != "" {
			e.ExitCode = -1
			e.Err = fmt.Errorf("killed by SIG%s", sig)
		}
	}
	e.Stderr = out.Said()
	return out.Stdout.Bytes(), e
}

// killGroup kills the process group pgid on the host, from a session of
// its own.
func (c *Client) killGroup(pgid int) {
	_, err := c.Exec(context.Background(), Command{
		Argv:    []string{"sh", "-c", `kill -s KILL -- "-$1"`, "sealbench-kill", strconv.Itoa(pgid)},
		Timeout: 15 * time.Second,
		Name:    "kill-" + strconv.Itoa(pgid),
	})
	if err != nil {
		c.cfg.Log("ssh %s: killing the process group %d past its deadline: %v", c.cfg.String(), pgid, err)
	}
}

// pidWriter takes the first line of a session's stdout, the shell's
// pid, and passes the rest on.
type pidWriter struct {
	w    io.Writer
	mu   sync.Mutex
	head []byte
	done bool
	pid  int
}

func (p *pidWriter) Write(b []byte) (int, error) {
	n := len(b)
	p.mu.Lock()
	if !p.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.head = append(p.head, b...)
			if len(p.head) <= 20 {
				p.mu.Unlock()
				return n, nil
			}
			// Not a pid: pass everything on.
			b, p.head, p.done = p.head, nil, true
		} else {
			p.head = append(p.head, b[:i]...)
			p.pid, _ = strconv.Atoi(string(p.head))
			b, p.head, p.done = b[i+1:], nil, true
		}
	}
	p.mu.Unlock()
	if len(b) == 0 {
		return n, nil
	}
	if _, err := p.w.Write(b); err != nil {
		return 0, err
	}
	return n, nil
}

// Pid is the pid the shell said, or 0.
func (p *pidWriter) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// newSession opens a session, within ctx: a host that stopped answering
// must not hold the caller past its deadline.
func (c *Client) newSession(ctx context.Context) (*ssh.Session, error) {
	type result struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.conn.NewSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if err := c.alive(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("opening a session: %w", r.err)
		}
		return r.s, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, fmt.Errorf("opening a session: %w", ctx.Err())
	}
}

// logBase picks the base name of one command's logs, NNN-<name>, or ""
// for none.
func (c *Client) logBase(cmd Command) string {
	if c.cfg.LogDir == "" {
		return ""
	}
	c.mu.Lock()
	c.logSeq++
	n := c.logSeq
	c.mu.Unlock()
	name := cmd.Name
	if name == "" {
		name = path.Base(cmd.Argv[0])
		if len(cmd.Argv) > 1 && !strings.HasPrefix(cmd.Argv[1], "-") && !strings.ContainsAny(cmd.Argv[1], "/ \n") {
			name += "-" + cmd.Argv[1]
		}
	}
	name = strings.Map(func(r rune) rune {
		if r == '/' || r <= ' ' {
			return '_'
		}
		return r
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	return toolexec.LogBase(c.cfg.LogDir, fmt.Sprintf("%03d-%s", n, name))
}
