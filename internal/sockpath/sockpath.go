// Package sockpath checks a unix socket's path against the kernel's limit
// before anything binds or dials it, so that a path too long is refused
// with its length and the limit instead of bind(2)'s "invalid argument";
// and listens on a socket only its user may reach (ListenPrivate), as the
// host's helpers do (the kube-engine, the msb proxy, the qemu link); Serve
// is the accept loop the msb proxy and the qemu link share. Standard
// library only.
package sockpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Max is the longest socket path, in bytes: sun_path holds 108 bytes,
// the terminating NUL among them.
const Max = 107

// ErrTooLong says a socket path is longer than Max.
var ErrTooLong = errors.New("unix socket path too long")

// Check returns an error wrapping ErrTooLong when path, made absolute as
// binding it would, is longer than Max bytes.
func Check(what, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %q: %w", what, path, err)
	}
	if len(abs) > Max {
		return fmt.Errorf("%s %q: %w: it is %d bytes, and a unix socket path holds at most %d (sun_path is 108 bytes with its NUL); use a shorter path",
			what, abs, ErrTooLong, len(abs), Max)
	}
	return nil
}

// ListenPrivate listens on the unix socket path, replacing a stale socket
// a helper that died left there, readable and writable by this user only.
// The caller closes the listener and removes path.
func ListenPrivate(what, path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, err
	}
	return ln, nil
}

// Serve hands each connection ln accepts to handle until ctx ends or stop
// (nil: never) closes; either closes ln. It returns nil when ctx ended,
// else why accepting failed (the closed listener's error once stop
// closed). handle runs on Serve's goroutine: it starts its own for work
// that lasts, so that the caller can count that work before it starts.
func Serve(ctx context.Context, ln net.Listener, stop <-chan struct{}, handle func(net.Conn)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		handle(conn)
	}
}
