//go:build linux

package layerfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/internal/sockpath"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// ServeConfig configures a daemon serving one Workspace.
type ServeConfig struct {
	Store     string
	Workspace string
	Control   string
	Layer     string // id or unique prefix; empty for the newest Layer
	Mount     MountOptions
	// UnmountWait bounds how long unmount waits for open files before
	// it unmounts lazily.
	UnmountWait time.Duration
	// Check is how the Store is checked when it is opened, before the
	// mount (and so outside the mount's timed window).
	Check CheckLevel
}

// ReadyInfo is what a daemon says once its Workspace is mounted.
type ReadyInfo = daemonapi.ReadyInfo

// mountRecord is mount.json: who holds the Store's mount lock.
type mountRecord struct {
	PID       int    `json:"pid"`
	Workspace string `json:"workspace"`
	Control   string `json:"control"`
	Overlay   string `json:"overlay,omitempty"`
}

// ErrBadControl says a control socket path names something that is not a
// socket: Serve would otherwise remove it to listen there.
var ErrBadControl = errors.New("control socket path is taken by something that is not a socket")

// CheckControl says whether Serve may listen at path: it fits in sun_path
// (sockpath.ErrTooLong otherwise), and holds nothing, or a socket (a stale
// one is replaced).
func CheckControl(path string) error {
	if err := sockpath.Check("control socket", path); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control socket %q: %w (a %s); give --control a path where nothing is yet", path, ErrBadControl, fileKind(fi.Mode()))
	}
	return nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}

// ErrStoreBusy says another daemon has the Store mounted.
var ErrStoreBusy = errors.New("store is already mounted")

// lockStore takes the Store's mount lock (released by the kernel when the
// process dies, however it dies).
func lockStore(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking store %q: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		holder := ""
		if b, rerr := os.ReadFile(filepath.Join(dir, mountInfoNam)); rerr == nil {
			var r mountRecord
			if json.Unmarshal(b, &r) == nil {
				holder = fmt.Sprintf(" (by pid %d at %s, control %s)", r.PID, r.Workspace, r.Control)
			}
		}
		return nil, fmt.Errorf("locking store %q: %w%s", dir, ErrStoreBusy, holder)
	}
	return f, nil
}

// isMountpoint reports whether dir is a mount point, from mountinfo.
func isMountpoint(dir string) bool { return mountinfo.IsMountpoint(dir) }

// cleanStale removes what a daemon that died left behind: its mount (the
// kernel keeps a dead FUSE mount, answering ENOTCONN), control socket, overlay
// and temporary files. The caller holds the lock, so no live daemon owns them.
func cleanStale(storeDir, workspace string) []string {
	var fixed []string
	detach := func(dir, why string) {
		// Detached, then its connection aborted: whatever still waits
		// on the dead daemon fails instead of hanging.
		minor, hasConn := fuseConnection(dir)
		if err := unmount(dir, unix.MNT_DETACH); err == nil {
			if hasConn {
				abortConnection(minor)
			}
			fixed = append(fixed, fmt.Sprintf("unmounted stale mount %s (%s)", dir, why))
		} else {
			fixed = append(fixed, fmt.Sprintf("could not unmount stale mount %s: %v", dir, err))
		}
	}
	if b, err := os.ReadFile(filepath.Join(storeDir, mountInfoNam)); err == nil {
		var r mountRecord
		if json.Unmarshal(b, &r) == nil {
			why := fmt.Sprintf("daemon pid %d is gone", r.PID)
			if r.Workspace != "" && isMountpoint(r.Workspace) {
				detach(r.Workspace, why)
			}
			if r.Overlay != "" && strings.HasPrefix(filepath.Base(r.Overlay), "layerfs-ws-") {
				if err := os.RemoveAll(r.Overlay); err == nil {
					fixed = append(fixed, fmt.Sprintf("removed stale overlay %s (%s)", r.Overlay, why))
				}
			}
			if r.Control != "" {
				if err := os.Remove(r.Control); err == nil {
					fixed = append(fixed, fmt.Sprintf("removed stale control socket %s (%s)", r.Control, why))
				}
			}
		}
		os.Remove(filepath.Join(storeDir, mountInfoNam))
	}
	if workspace != "" && isMountpoint(workspace) && isDeadMount(probeMount(workspace)) {
		detach(workspace, "its daemon is gone")
	}
	// Overlays belong to mounts, and we hold the mount lock. Temporary
	// files may belong to an import running now, so only old ones go.
	for _, sub := range []string{overlaysDir, tmpDir} {
		ents, _ := os.ReadDir(filepath.Join(storeDir, sub))
		n := 0
		for _, e := range ents {
			if sub == tmpDir {
				if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < time.Hour {
					continue
				}
			}
			os.RemoveAll(filepath.Join(storeDir, sub, e.Name()))
			n++
		}
		if n > 0 {
			fixed = append(fixed, fmt.Sprintf("removed %d stale entries from %s", n, filepath.Join(storeDir, sub)))
		}
	}
	return fixed
}

// fuseConnection is the FUSE connection (its number under
// /sys/fs/fuse/connections, the mount's device minor) of the mount at dir,
// read from mountinfo: a dead mount cannot be stat'ed.
func fuseConnection(dir string) (uint32, bool) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, false
	}
	var minor uint32
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || strings.ReplaceAll(f[4], "\\040", " ") != dir {
			continue
		}
		if _, minorText, ok := strings.Cut(f[2], ":"); ok {
			if n, err := strconv.ParseUint(minorText, 10, 32); err == nil {
				minor, found = uint32(n), true // the last mount there is the one seen
			}
		}
	}
	return minor, found
}

// ErrDaemonAlive says a daemon that does not answer is still alive: its
// mount is not cleared from under it.
var ErrDaemonAlive = errors.New("the daemon is alive")

// ClearDeadMount clears what a daemon that died left (for `layerfsd
// unmount` when nobody answers on the control socket): its mount, detached
// lazily and its FUSE connection aborted, so nothing hangs on it; its
// control socket; and, given the Store, its mount record and overlay. It
// takes the Store's mount lock first, which only a dead daemon leaves free;
// without the Store, it clears the mount only if the mount answers as dead
// (ENOTCONN). It returns what it did.
func ClearDeadMount(store, workspace, control string) ([]string, error) {
	for _, p := range []*string{&store, &workspace, &control} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return nil, err
			}
			*p = abs
		}
	}
	var fixed []string
	if store != "" {
		lock, err := lockStore(store)
		if err != nil {
			return nil, fmt.Errorf("clearing the mount of store %q: %w", store, err)
		}
		defer lock.Close()
		if b, err := os.ReadFile(filepath.Join(store, mountInfoNam)); err == nil {
			var r mountRecord
			if json.Unmarshal(b, &r) == nil && r.Workspace != "" && workspace == "" {
				workspace = r.Workspace
			}
		}
		fixed = cleanStale(store, workspace)
	} else if workspace != "" && isMountpoint(workspace) {
		if err := probeMount(workspace); !isDeadMount(err) {
			return nil, fmt.Errorf("clearing the mount at %q: %w (it still answers%s); give --store to check by the Store's lock, or stop the daemon", workspace, ErrDaemonAlive, errSuffix(err))
		}
		minor, hasConn := fuseConnection(workspace)
		if err := unmount(workspace, unix.MNT_DETACH); err != nil {
			return nil, fmt.Errorf("clearing the mount at %q: %w", workspace, err)
		}
		if hasConn {
			abortConnection(minor)
		}
		fixed = append(fixed, fmt.Sprintf("unmounted stale mount %s (its daemon is gone)", workspace))
	}
	if control != "" {
		if fi, err := os.Lstat(control); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.DialTimeout("unix", control, 200*time.Millisecond); err == nil {
				c.Close()
			} else if os.Remove(control) == nil {
				fixed = append(fixed, fmt.Sprintf("removed stale control socket %s", control))
			}
		}
	}
	return fixed, nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// probeMount asks the file system mounted at dir for something it must
// answer itself: statfs, which the kernel never serves from a cache. A
// stat alone is not enough: the kernel may answer it from the attributes
// it cached before the daemon died.
func probeMount(dir string) error {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs)
}

// isDeadMount says whether err is what a FUSE mount whose daemon died
// answers: ENOTCONN, or ECONNABORTED where the kernel aborted the
// connection (over io_uring it does when the daemon dies), or ECANCELED:
// over io_uring, a request the kernel hands to the ring while the dead
// daemon's ring is still being torn down ends canceled (CI saw a statfs
// do so right after the daemon was reaped).
func isDeadMount(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.ECANCELED)
}

// Serve opens the Store, mounts the Workspace and serves the control socket
// until an unmount request, or until ctx is done (then it unmounts too).
// ready is called once the Workspace is mounted and the socket listens.
func Serve(ctx context.Context, cfg ServeConfig, ready func(ReadyInfo)) (err error) {
	var cu cleanup
	defer func() {
		if err != nil {
			cu.run()
		}
	}()
	if cfg.UnmountWait <= 0 {
		cfg.UnmountWait = 2 * time.Second
	}
	for _, p := range []*string{&cfg.Store, &cfg.Workspace, &cfg.Control} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if err := CheckControl(cfg.Control); err != nil {
		return err
	}
	// What the daemon logs (every I/O error it answers the kernel with,
	// once per cause) goes to its stderr, which mount points at
	// daemon.log.
	if cfg.Mount.Logger == nil {
		cfg.Mount.Logger = log.New(os.Stderr, fmt.Sprintf("layerfsd[%d]: ", os.Getpid()), log.LstdFlags|log.Lmicroseconds)
	}
	s, err := OpenWith(ctx, cfg.Store, OpenOptions{Check: cfg.Check})
	if err != nil {
		return err
	}
	cu.add(func() { s.Close() })
	lock, err := lockStore(cfg.Store)
	if err != nil {
		return err
	}
	cu.add(func() { lock.Close() })
	info := ReadyInfo{PID: os.Getpid(), Store: cfg.Store, Workspace: cfg.Workspace, Control: cfg.Control}
	info.StaleFixed = cleanStale(cfg.Store, cfg.Workspace)
	if cfg.Layer != "" {
		l, err := s.ResolveLayer(ctx, cfg.Layer)
		if err != nil {
			return err
		}
		cfg.Mount.Layer = l
	}
	if err := checkMountpoint(cfg.Workspace); err != nil {
		return err
	}
	// The control socket: refuse to take over a live one.
	if c, err := net.DialTimeout("unix", cfg.Control, 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("listening on control socket %q: another daemon answers there", cfg.Control)
	}
	os.Remove(cfg.Control)
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", cfg.Control)
	unix.Umask(old)
	if err != nil {
		return fmt.Errorf("listening on control socket %q: %w", cfg.Control, err)
	}
	cu.add(func() { ln.Close(); os.Remove(cfg.Control) })
	if err := os.Chmod(cfg.Control, 0o600); err != nil {
		return fmt.Errorf("listening on control socket %q: %w", cfg.Control, err)
	}

	rec, _ := json.Marshal(mountRecord{PID: info.PID, Workspace: cfg.Workspace, Control: cfg.Control})
	if err := writeFileAtomic(filepath.Join(cfg.Store, mountInfoNam), rec); err != nil {
		return err
	}
	cu.add(func() { os.Remove(filepath.Join(cfg.Store, mountInfoNam)) })

	// A check read the whole database through the pure-Go SQLite: its
	// garbage is collected, and the memory given back, now, not by the
	// collector and the scavenger inside the mount's timed window.
	if cfg.Check != CheckHeader {
		debug.FreeOSMemory()
	}
	ws, err := Mount(ctx, s, cfg.Workspace, cfg.Mount)
	if err != nil {
		return err
	}
	cu.add(func() { ws.Unmount(cfg.UnmountWait) })
	rec, _ = json.Marshal(mountRecord{PID: info.PID, Workspace: cfg.Workspace, Control: cfg.Control, Overlay: ws.upperDir})
	if err := writeFileAtomic(filepath.Join(cfg.Store, mountInfoNam), rec); err != nil {
		return err
	}
	if b := ws.Base(); !b.ID.IsZero() {
		info.Layer = b.ID.String()
	}
	info.MountNs = int64(ws.mountDur)
	info.Features = ws.features

	// release gives the Store back: the control socket, the mount record,
	// the database and the lock. The unmount handler calls it before
	// answering, so that once `layerfsd unmount` returns the Store can be
	// mounted again at once. The socket goes first, while we still hold the
	// lock: removed any later, its path may already be the next daemon's.
	// (Closing the listener does not end the connection being answered.)
	release := sync.OnceFunc(func() {
		ln.Close()
		os.Remove(cfg.Control)
		os.Remove(filepath.Join(cfg.Store, mountInfoNam))
		s.Close()
		lock.Close()
	})
	done := make(chan *UnmountResult, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := ws.Stats(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("POST /v1/commit", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Message string `json:"message"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			reply(w, nil, fmt.Errorf("reading commit request: %w", err))
			return
		}
		// The daemon's context, not the request's: a Commit ends when
		// the daemon is told to stop (SIGINT, SIGTERM), and then
		// leaves the Store as it was; not when its client goes.
		res, err := ws.Commit(ctx, req.Message)
		if err != nil {
			reply(w, nil, err)
			return
		}
		reply(w, res.Info(), nil)
	})
	mux.HandleFunc("POST /v1/unmount", func(w http.ResponseWriter, r *http.Request) {
		res, err := ws.Unmount(cfg.UnmountWait)
		if err == nil {
			release()
		}
		reply(w, res, err)
		if err == nil {
			done <- res
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	ready(info)
	cu.release()

	// Someone may unmount the Workspace behind our back (umount(8)):
	// then the serve loops end, and so does the daemon.
	gone := make(chan struct{})
	go func() { ws.server.Wait(); close(gone) }()
	select {
	case <-done:
	case <-gone:
		ws.mu.Lock()
		closed := ws.closed
		ws.mu.Unlock()
		if !closed {
			ws.Unmount(cfg.UnmountWait)
		}
	case <-ctx.Done():
		ws.Unmount(cfg.UnmountWait)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(sctx)
	cancel()
	release()
	return nil
}

type apiError struct {
	Error string `json:"error"`
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(apiError{err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// cleanup runs rollback steps in reverse order, unless released.
type cleanup struct{ fns []func() }

func (c *cleanup) add(f func()) { c.fns = append(c.fns, f) }
func (c *cleanup) release()     { c.fns = nil }
func (c *cleanup) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// writeFileAtomic writes a file by temp file, fsync and rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return fmt.Errorf("writing %q: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %q: %w", path, err)
	}
	return nil
}

// ErrNoAnswer says the control socket did not answer in time.
var ErrNoAnswer = errors.New("control socket did not answer")

// Client talks to a daemon's control socket.
type Client struct {
	Socket  string
	Timeout time.Duration // per request; 0 means 10 s
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Socket)
		},
		DisableKeepAlives: true,
	}}
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://layerfsd"+path, rd)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s on %q: %w within %v", method, path, c.Socket, ErrNoAnswer, timeout)
		}
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("%s %s on %q: %w (no daemon listens there: %v)", method, path, c.Socket, ErrNoAnswer, err)
		}
		return fmt.Errorf("%s %s on %q: %w", method, path, c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e apiError
		json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("daemon at %q: %s", c.Socket, e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s on %q: %w within %v", method, path, c.Socket, ErrNoAnswer, timeout)
		}
		return fmt.Errorf("reading answer of %s %s from %q: %w", method, path, c.Socket, err)
	}
	return nil
}

// Stats asks the daemon for its telemetry.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var st Stats
	return &st, c.do(ctx, "GET", "/v1/stats", nil, &st)
}

// Commit asks the daemon to commit its Workspace.
func (c *Client) Commit(ctx context.Context, message string) (*daemonapi.CommitResult, error) {
	var res daemonapi.CommitResult
	return &res, c.do(ctx, "POST", "/v1/commit", map[string]string{"message": message}, &res)
}

// Unmount asks the daemon to unmount its Workspace and exit.
func (c *Client) Unmount(ctx context.Context) (*UnmountResult, error) {
	var res UnmountResult
	return &res, c.do(ctx, "POST", "/v1/unmount", nil, &res)
}
