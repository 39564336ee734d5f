//go:build linux

package standin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/sockpath"
)

// ErrUnsafeSocketDir is returned when the socket's directory could let
// another user reach the socket.
var ErrUnsafeSocketDir = errors.New("unsafe socket directory")

// Listen listens on a unix socket at path, the only kind of listener the
// stand-in ever opens. The socket's directory is created with mode 0700,
// or, if it exists, must be owned by this user and closed to everyone
// else; the socket itself is 0600. Connections from any other user are
// refused after accept (SO_PEERCRED), as a second line behind the
// directory's mode. A stale socket file left by a previous run is
// replaced; a live one (something answers on it) is an error.
func Listen(path string) (*Listener, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := CheckSocket(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return nil, fmt.Errorf("creating socket directory %q: %w", dir, err)
	}
	// Checked again now that it exists: it may have been made meanwhile.
	if err := checkSocketDir(dir, path); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket %q: %w", path, err)
		}
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %q: %w", path, err)
	}
	ul.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		return nil, fmt.Errorf("restricting socket %q to its owner: %w", path, err)
	}
	return &Listener{UnixListener: ul, Path: path, UID: os.Geteuid()}, nil
}

// CheckSocket says whether Listen would take path, creating nothing: the
// path fits in sun_path; its directory exists, owned by this user and
// closed to everyone else, or is missing and its parent exists (Listen
// makes it, 0700); nothing but a stale socket is at path; and nobody
// answers there. Serve checks it before it creates the state directory.
func CheckSocket(path string) error {
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if err := sockpath.Check("socket", path); err != nil {
		return fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		if st, err := os.Stat(parent); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: the socket's directory %q is missing and so is its parent %q; create %q (mode 0700), or give --socket a path in an existing directory",
				ErrUnsafeSocketDir, dir, parent, dir)
		}
		return nil
	}
	if err := checkSocketDir(dir, path); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%w: %q exists and is not a socket; remove it, or give --socket another path", ErrBadInput, path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("%w: another server is listening on %q", ErrConflict, path)
		}
	}
	return nil
}

// checkSocketDir insists on a directory owned by this user, closed to
// everyone else.
func checkSocketDir(dir, path string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("%w: %q is not a directory; give --socket a path in a directory of its own", ErrUnsafeSocketDir, dir)
		}
		return fmt.Errorf("checking socket directory %q: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: %q is not a directory; give --socket a path in a directory of its own", ErrUnsafeSocketDir, dir)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%w: %q has mode %#o and owner uid %d; the stand-in's socket needs a directory of its own with mode 0700 (e.g. %s)",
			ErrUnsafeSocketDir, dir, st.Mode&0o7777, st.Uid, filepath.Join(dir, "standin", filepath.Base(path)))
	}
	return nil
}

// Listener is a unix listener that accepts only connections from UID.
type Listener struct {
	*net.UnixListener
	Path string
	UID  int
	// Refused, when set, is told about each refused connection.
	Refused func(uid, pid int)
}

// Accept returns the next connection from UID, closing any from others.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, pid, err := peerCred(c)
		if err == nil && uid == l.UID {
			return c, nil
		}
		c.Close()
		if l.Refused != nil {
			l.Refused(uid, pid)
		}
	}
}

func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, -1, err
	}
	if cerr != nil {
		return -1, -1, cerr
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// ServeOptions configure Serve.
type ServeOptions struct {
	Socket string
	Options
	// Ready, when set, is called once the socket accepts connections.
	Ready func(socket string)
}

// Serve runs the stand-in in the foreground until ctx is done, then stops
// cleanly: no new connections, every Sandbox killed and waited for (their
// mounts and namespaces go with them), container files removed, the
// socket removed. It returns nil after a clean stop.
func Serve(ctx context.Context, opts ServeOptions) error {
	// Every argument is checked before the state directory is created.
	if err := CheckSocket(opts.Socket); err != nil {
		return err
	}
	if err := CheckStateDir(opts.StateDir); err != nil {
		return err
	}
	srv, err := New(opts.Options)
	if err != nil {
		return err
	}
	l, err := Listen(opts.Socket)
	if err != nil {
		srv.Close()
		return err
	}
	l.Refused = func(uid, pid int) {
		srv.logf("refused a connection from uid %d (pid %d): only uid %d may use %s", uid, pid, l.UID, l.Path)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(l) }()
	if opts.Ready != nil {
		opts.Ready(l.Path)
	}
	var errs []error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		errs = append(errs, fmt.Errorf("serving on %s: %w", l.Path, err))
	}
	// Close alongside Shutdown: it ends hijacked streams and long waits,
	// which would otherwise hold Shutdown until its deadline.
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-closed; err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// lockState takes an exclusive lock on the state directory, so that two
// stand-ins never share one.
func lockState(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the state lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: state directory %q is in use by another stand-in: %v", ErrConflict, dir, err)
	}
	return f, nil
}
