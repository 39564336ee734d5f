//go:build linux

package standin

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/standin/inventory"
)

func TestListenModes(t *testing.T) {
	base := t.TempDir()
	l, err := Listen(filepath.Join(base, "run", "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for p, want := range map[string]os.FileMode{filepath.Join(base, "run"): 0o700, l.Path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", p, fi.Mode().Perm(), want)
		}
	}
	if _, err := Listen(l.Path); !errors.Is(err, ErrConflict) {
		t.Errorf("a second listener on a live socket: %v, want a conflict", err)
	}
}

func TestListenRefusesAnOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(dir, "s.sock")); !errors.Is(err, ErrUnsafeSocketDir) {
		t.Errorf("listening in a 0755 directory: %v, want ErrUnsafeSocketDir", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s.sock")); !os.IsNotExist(err) {
		t.Errorf("a socket was created anyway: %v", err)
	}
}

// TestListenRefusesOtherUsers: a connection whose peer is not the allowed
// user is closed before a single byte is served.
func TestListenRefusesOtherUsers(t *testing.T) {
	l, err := Listen(filepath.Join(t.TempDir(), "run", "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	refused := make(chan int, 1)
	l.Refused = func(uid, _ int) { refused <- uid }
	l.UID = os.Geteuid() + 1 // so that we, the peer, are "another user"
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("served"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", l.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := io.ReadAll(c)
	if len(b) != 0 {
		t.Errorf("another user was served %q", b)
	}
	if uid := <-refused; uid != os.Geteuid() {
		t.Errorf("refused uid %d, want %d", uid, os.Geteuid())
	}
}

// dialAs connects to the socket from a thread running as uid, and returns
// what a ping answers. The thread's credentials change (a raw setresuid
// is per thread), so it is locked and thrown away afterwards.
func dialAs(uid int, socket string) (string, error) {
	type result struct {
		out string
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if uid != os.Geteuid() {
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
				rc <- result{err: e}
				return
			}
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			rc <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: socket}); err != nil {
			rc <- result{err: err}
			return
		}
		unix.Write(fd, []byte("GET /_ping HTTP/1.0\r\n\r\n"))
		buf := make([]byte, 4096)
		n, _ := unix.Read(fd, buf)
		rc <- result{out: string(buf[:max(n, 0)])}
	}()
	r := <-rc
	return r.out, r.err
}

// TestSocketUnreachableForOtherUsers: a real other user (nobody) cannot
// even reach the socket through its 0700 directory.
func TestSocketUnreachableForOtherUsers(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	if out, err := dialAs(65534, s.socket); !errors.Is(err, unix.EACCES) {
		t.Errorf("nobody connecting: %v, %q; want EACCES", err, out)
	}
	// The same as ourselves reaches it: the check can fail.
	if out, err := dialAs(os.Geteuid(), s.socket); err != nil || !strings.Contains(out, "OK") {
		t.Errorf("connecting as ourselves: %v, %q", err, out)
	}
}

// TestServeStopsCleanly runs Serve with a running Sandbox and a stream in
// flight, cancels it, and audits the state directory.
func TestServeStopsCleanly(t *testing.T) {
	testenv.NeedRoot(t)
	ts, cancel, done := serveTest(t)
	cli, state, sock := ts.cli, ts.state, ts.socket
	withBusybox(t, ts, false)
	id := ts.run(t, &container.Config{Cmd: []string{"sleep", "1000"}}, nil)
	// A stream that would never end on its own.
	created, err := cli.ContainerExecCreate(context.Background(), id, container.ExecOptions{Cmd: []string{"sleep", "1000"}, AttachStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	hr, err := cli.ContainerExecAttach(context.Background(), created.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Close()
	waitC, _ := cli.ContainerWait(context.Background(), id, container.WaitConditionNotRunning)

	inv, err := inventory.Read(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Processes) != 1 || !inv.LockHeld || len(inv.Containers) != 1 {
		t.Fatalf("while serving: %+v; want one Sandbox init, the lock held, one container", inv)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return within a minute of cancel")
	}
	io.Copy(io.Discard, hr.Reader) // the stream ends
	select {
	case <-waitC:
	case <-time.After(time.Minute):
		t.Error("a wait in flight never returned")
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
	inv, err = inventory.Read(state)
	if err != nil {
		t.Fatal(err)
	}
	if left := inv.Leftovers(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if len(inv.Images) != 1 || len(inv.Layers) != 1 {
		t.Errorf("images should stay: %+v", inv)
	}
}

func TestListenReplacesAStaleSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run", "s.sock")
	l, err := Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false) // as a crashed stand-in leaves it
	l.Close()
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("the stale socket is not there to test with: %v", err)
	}
	l, err = Listen(p)
	if err != nil {
		t.Fatalf("listening over a stale socket: %v", err)
	}
	l.Close()
}
