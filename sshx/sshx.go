// Package sshx is sealbench's SSH transport: one connection to one remote
// host, over which the remote targets run their commands, copy the
// bundle's files and reach the host's Engine socket.
//
// It is golang.org/x/crypto/ssh, held to these rules:
//
//   - Host keys are checked against known_hosts (the user's, or
//     Config.KnownHosts): an unknown key and a changed key are both refused
//     with a *HostKeyError that says what the host offered and the line to
//     add. Nothing is ever trusted on first use.
//   - The user's ssh_config (~/.ssh/config, then /etc/ssh/ssh_config) is
//     read for the host as OpenSSH's client reads it (FromSSHConfig):
//     HostName, Port, User, IdentityFile, UserKnownHostsFile and ProxyJump
//     fill what the Config leaves empty; what it sets (the flags) wins.
//   - Authentication is by public key only: Config.Identity alone when it
//     is set, otherwise the user's agent (SSH_AUTH_SOCK), then
//     ssh_config's IdentityFile keys or, without any, the default keys in
//     ~/.ssh, those that need no passphrase. There is no password or
//     keyboard-interactive method, so nothing can prompt.
//   - A ProxyJump host is reached first, as its own Config says, and the
//     host through it (a direct-tcpip channel, as OpenSSH's -J): the host
//     key of every hop is checked.
//   - One connection carries everything (Exec, DialUnix, ForwardUnix,
//     CopyFile); keep-alives close it when the host stops answering, and
//     every operation on a closed Client fails at once, naming why.
//   - Every remote command has a deadline (Command.Timeout, or
//     Config.CommandTimeout): past it the remote process is killed and the
//     session closed. Its stdout and stderr are kept in Config.LogDir.
//   - A file copy hashes the bytes it sends against the manifest's digest
//     and has the host hash the file as written, before it is renamed into
//     place.
//
// The remote side needs a POSIX sh, cat, chmod, mv, rm and sha256sum
// (coreutils), and an sshd that allows streamlocal forwarding for
// ForwardUnix and DialUnix (OpenSSH's default).
//
// sshtest starts the real sshd the tests use, one per loopback address.
package sshx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Defaults for the Config fields left zero.
const (
	DefaultPort              = 22
	DefaultDialTimeout       = 20 * time.Second
	DefaultCommandTimeout    = 2 * time.Minute
	DefaultKeepAliveInterval = 15 * time.Second
	DefaultKeepAliveMax      = 3
)

// Config says which host to reach, as whom, and how.
type Config struct {
	User string
	Host string // a name or an address (IPv6 without brackets)
	Port int    // 0: ssh_config's Port, else DefaultPort
	// Alias is the host as the user named it, which ssh_config is read
	// for (its Host patterns match it); empty: Host.
	Alias string
	// Identity, when set, is the one private key file to log in with (it
	// must need no passphrase); otherwise the agent and IdentityFiles, or
	// the default keys when there are none.
	Identity string
	// IdentityFiles are the key files ssh_config names for the host
	// (IdentityFile), offered after the agent's keys; one that needs a
	// passphrase is left to the agent.
	IdentityFiles []string
	// KnownHosts is the known_hosts file host keys are checked against;
	// empty: ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts.
	KnownHosts string
	// Jump, when not nil, is the host the connection goes through
	// (ssh_config's ProxyJump; its own Jump the hop before it).
	Jump *Config
	// DialTimeout bounds the TCP connection and the SSH handshake.
	DialTimeout time.Duration
	// CommandTimeout bounds a command that sets no Timeout of its own.
	CommandTimeout time.Duration
	// KeepAliveInterval is how often the host is asked whether it is
	// still there; after KeepAliveMax questions in a row without an
	// answer, the connection is closed.
	KeepAliveInterval time.Duration
	KeepAliveMax      int
	// LogDir, when set, keeps each command's stdout and stderr as
	// NNN-<name>.out and .err (0600; the directory is made 0700).
	LogDir string
	// Log receives a line per command run and per notable event.
	Log func(format string, args ...any)
}

// FillDefaults sets the fields left zero.
func (c *Config) FillDefaults() {
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.KeepAliveInterval == 0 {
		c.KeepAliveInterval = DefaultKeepAliveInterval
	}
	if c.KeepAliveMax == 0 {
		c.KeepAliveMax = DefaultKeepAliveMax
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Validate reports every problem with c, each naming its field.
func (c *Config) Validate() error {
	var errs []error
	if c.User == "" {
		errs = append(errs, errors.New("user: missing"))
	}
	if c.Host == "" {
		errs = append(errs, errors.New("host: missing"))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port: %d is not 1 to 65535", c.Port))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"dialTimeout", c.DialTimeout}, {"commandTimeout", c.CommandTimeout}, {"keepAliveInterval", c.KeepAliveInterval}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative", d.name, d.v))
		}
	}
	if c.KeepAliveMax < 0 {
		errs = append(errs, fmt.Errorf("keepAliveMax: %d is negative", c.KeepAliveMax))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ssh configuration: %w", err)
	}
	return nil
}

// Addr is host:port, as net.Dial takes it.
func (c *Config) Addr() string {
	port := c.Port
	if port == 0 {
		port = DefaultPort
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(port))
}

// String names the host as a target spec does: ssh://user@host:port.
func (c *Config) String() string { return "ssh://" + c.User + "@" + c.Addr() }

// Route names the host and the hops to it, for messages:
// ssh://user@host:port, with " via ssh://..." for each ProxyJump hop.
func (c *Config) Route() string {
	s := c.String()
	for j := c.Jump; j != nil; j = j.Jump {
		s += " via " + j.String()
	}
	return s
}

// Client is one SSH connection to one host. It is safe for concurrent
// use; Close it when done.
type Client struct {
	cfg  Config
	conn *ssh.Client
	jump *Client // the ProxyJump hop the connection goes through, or nil

	done     chan struct{} // closed when the connection is gone
	mu       sync.Mutex
	err      error // why it is gone
	closing  bool
	logSeq   int
	stopKeep chan struct{}
}

// Dial connects to cfg's host, checks its key and logs in. It fails, with
// the reason and what to do, for an unknown or changed host key, a key
// the host refuses, or an encrypted identity (nothing prompts).
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := FromSSHConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg.FillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hostKey, algos, err := hostKeyCheck(&cfg)
	if err != nil {
		return nil, err
	}
	auth, closeAuth, err := authMethods(&cfg)
	if err != nil {
		return nil, err
	}
	defer closeAuth()
	sc := &ssh.ClientConfig{
		User:              cfg.User,
		Auth:              auth,
		HostKeyCallback:   hostKey,
		HostKeyAlgorithms: algos,
		Timeout:           cfg.DialTimeout,
	}
	addr := cfg.Addr()
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	var jump *Client
	var tcp net.Conn
	if cfg.Jump != nil {
		// ProxyJump: the hop first, then a channel through it.
		if jump, err = Dial(dctx, *cfg.Jump); err != nil {
			return nil, fmt.Errorf("connecting to %s through its ProxyJump: %w", cfg.String(), err)
		}
		tcp, err = jump.conn.DialContext(dctx, "tcp", addr)
		if err != nil {
			jump.Close()
			return nil, fmt.Errorf("connecting to %s through %s: %w", cfg.String(), jump.String(), err)
		}
	} else {
		var d net.Dialer
		if tcp, err = d.DialContext(dctx, "tcp", addr); err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", cfg.String(), err)
		}
	}
	closeJump := func() {
		if jump != nil {
			jump.Close()
		}
	}
	// The handshake has the dial's deadline too, and ends early with ctx.
	deadline, _ := dctx.Deadline()
	tcp.SetDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { tcp.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(tcp, addr, sc)
	if !stop() || err != nil {
		tcp.Close()
		closeJump()
		if err == nil {
			err = dctx.Err()
		}
		return nil, loginError(&cfg, err)
	}
	tcp.SetDeadline(time.Time{})
	c := &Client{cfg: cfg, conn: ssh.NewClient(cc, chans, reqs), jump: jump, done: make(chan struct{}), stopKeep: make(chan struct{})}
	go c.watch()
	go c.keepAlive()
	return c, nil
}

// loginError says why logging in failed, keeping a host-key refusal as it is.
func loginError(cfg *Config, err error) error {
	var hk *HostKeyError
	if errors.As(err, &hk) {
		return hk
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || isTimeout(err) {
		return fmt.Errorf("logging in to %s: no answer within %s: %w", cfg.String(), cfg.DialTimeout, err)
	}
	if isAuthFailure(err) {
		return fmt.Errorf("logging in to %s: the host refused every key offered (%s); add the public key to %s's authorized_keys there, or give another with --ssh-identity: %w",
			cfg.String(), keySource(cfg), cfg.User, err)
	}
	return fmt.Errorf("logging in to %s: %w", cfg.String(), err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isAuthFailure recognizes x/crypto's "unable to authenticate", which it
// returns as a plain error.
func isAuthFailure(err error) bool {
	return strings.Contains(err.Error(), "ssh: unable to authenticate")
}

// Config is the client's configuration, defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// String names the host: ssh://user@host:port.
func (c *Client) String() string { return c.cfg.String() }

// Done is closed when the connection is gone; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection is gone, or nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// alive fails when the connection is gone, naming why.
func (c *Client) alive() error {
	select {
	case <-c.done:
		return c.Err()
	default:
		return nil
	}
}

// Close closes the connection, and with it every session and forward on it.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		close(c.stopKeep)
	}
	c.mu.Unlock()
	err := c.conn.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if c.jump != nil {
		c.jump.Close()
	}
	return err
}

// lost closes the connection for reason, unless it is gone already.
func (c *Client) lost(reason error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = reason
	}
	c.mu.Unlock()
	c.conn.Close()
}

// watch waits for the connection to end and records why.
func (c *Client) watch() {
	werr := c.conn.Wait()
	c.mu.Lock()
	if c.err == nil {
		switch {
		case c.closing:
			c.err = fmt.Errorf("the connection to %s was closed", c.cfg.String())
		case werr != nil:
			c.err = fmt.Errorf("the connection to %s was lost: %w", c.cfg.String(), werr)
		default:
			c.err = fmt.Errorf("the connection to %s was lost: the host closed it", c.cfg.String())
		}
	}
	c.mu.Unlock()
	close(c.done)
	if c.jump != nil {
		// Nothing else goes through the hop.
		c.jump.Close()
	}
}

// ErrNoKeepAlive is in the error of a connection closed because the host
// stopped answering keep-alives.
var ErrNoKeepAlive = errors.New("the host stopped answering keep-alives")

// keepAlive asks the host, every interval, whether it is still there
// (OpenSSH's keepalive@openssh.com, answered even when refused), and
// closes the connection after KeepAliveMax questions in a row go
// unanswered within an interval.
func (c *Client) keepAlive() {
	t := time.NewTicker(c.cfg.KeepAliveInterval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-c.stopKeep:
			return
		case <-c.done:
			return
		case <-t.C:
		}
		answered := make(chan struct{})
		go func() {
			c.conn.SendRequest("keepalive@openssh.com", true, nil)
			close(answered)
		}()
		select {
		case <-answered:
			missed = 0
			continue
		case <-c.stopKeep:
			return
		case <-c.done:
			return
		case <-time.After(c.cfg.KeepAliveInterval):
		}
		missed++
		if missed >= c.cfg.KeepAliveMax {
			c.lost(fmt.Errorf("the connection to %s was lost: %w (%d in a row, every %s)", c.cfg.String(), ErrNoKeepAlive, missed, c.cfg.KeepAliveInterval))
			return
		}
	}
}
