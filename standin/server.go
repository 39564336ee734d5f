//go:build linux

package standin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/internal/version"
)

// The Engine API versions the stand-in speaks (engineapi's).
const (
	APIVersion    = engineapi.APIVersion
	MinAPIVersion = engineapi.MinAPIVersion
)

// DaemonProcs is the GOMAXPROCS `standin serve` runs with when the
// environment sets none. The stand-in answers one runner's calls one
// after another; with more than one P, the Go scheduler wakes an idle
// thread on another CPU for each message it gets, and those wake-ups take
// CPU time from the commands being measured (make bench-exec: 1.71x a
// bare fork+exec+wait with two Ps on a 2-CPU VM, 1.63x with one).
const DaemonProcs = 1

// Options configure a Server.
type Options struct {
	// StateDir holds images, layers and the Sandboxes' files. It must be
	// on a filesystem overlayfs accepts as upper (not overlayfs itself),
	// and its path may not contain ',' or ':'.
	StateDir string
	// Logf receives one line per notable event (a refused connection, a
	// Sandbox that failed to stop). Nil discards them.
	Logf func(format string, args ...any)
}

// Server answers the Engine API. It is an http.Handler; Close stops every
// Sandbox it started and removes their files.
type Server struct {
	state  string
	logf   func(string, ...any)
	images *imageStore
	id     string
	start  time.Time
	lock   *os.File // flock on state/lock: one stand-in per state directory

	api *engineapi.Router // the Engine API, routed to the methods the Backend interfaces name

	mu         sync.Mutex
	closed     bool
	containers map[string]*containerRec // by full ID
	execs      map[string]*execRec
	hijacked   map[net.Conn]struct{}
}

var (
	_ http.Handler                = (*Server)(nil)
	_ engineapi.Backend           = (*Server)(nil)
	_ engineapi.ImageLister       = (*Server)(nil)
	_ engineapi.ContainerLister   = (*Server)(nil)
	_ engineapi.ContainerStopper  = (*Server)(nil)
	_ engineapi.ContainerAttacher = (*Server)(nil)
)

// New opens (creating it if needed) the state directory and returns a
// Server. Containers are not kept across restarts: whatever a previous
// stand-in left under containers/ is removed; images are kept.
func New(opts Options) (*Server, error) {
	if err := CheckStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory %q: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restricting state directory %q to its owner: %w", dir, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err == nil && sfs.Type == unix.OVERLAYFS_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: state directory %q is on overlayfs, which cannot hold a Sandbox's upper layer", ErrBadInput, dir)
	}
	lock, err := lockState(dir)
	if err != nil {
		return nil, err
	}
	images, err := openImageStore(dir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	cdir := filepath.Join(dir, "containers")
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		lock.Close()
		return nil, fmt.Errorf("creating %q: %w", cdir, err)
	}
	if err := clearDir(cdir); err != nil {
		lock.Close()
		return nil, err
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Server{
		state: dir, logf: logf, images: images, id: stateID(dir), start: time.Now(), lock: lock,
		containers: map[string]*containerRec{}, execs: map[string]*execRec{}, hijacked: map[net.Conn]struct{}{},
	}
	s.api = engineapi.NewRouter(s, engineapi.Identity{
		Name:   "the sealbench stand-in",
		Server: "sealbench-standin/" + version.Version + " (" + runtime.GOOS + ")",
		OS:     runtime.GOOS,
	})
	return s, nil
}

// CheckStateDir says whether New can use dir as the state directory,
// creating nothing: a path overlayfs mount options can carry, and a
// directory or nothing yet (a missing one is created, parents included).
func CheckStateDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: no state directory given", ErrBadInput)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if strings.ContainsAny(abs, ",:\n") {
		return fmt.Errorf("%w: state directory %q contains ',', ':' or a newline, which overlayfs mount options cannot carry; give --state another path", ErrBadInput, abs)
	}
	// The path, or its nearest existing ancestor, must be a directory.
	for p := abs; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) && p != filepath.Dir(p) {
			continue
		}
		if err != nil {
			return fmt.Errorf("checking state directory %q: %w", abs, err)
		}
		if !st.IsDir() {
			what := "is a file"
			if p != abs {
				what = fmt.Sprintf("is under %q, which is a file", p)
			}
			return fmt.Errorf("%w: state directory %q %s; give --state a directory, or a path to create one at", ErrBadInput, abs, what)
		}
		return nil
	}
}

// stateID is the engine's ID, kept in the state directory so it survives restarts.
func stateID(dir string) string {
	p := filepath.Join(dir, "engine-id")
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	id := randomHex(16)
	os.WriteFile(p, []byte(id+"\n"), 0o600)
	return id
}

// Close stops every Sandbox (SIGKILL to its init, which ends its PID
// namespace and with it its mounts), waits for them, closes hijacked
// connections and removes the containers' files. Every step runs; the
// errors are joined.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var cs []*containerRec
	for _, c := range s.containers {
		cs = append(cs, c)
	}
	conns := make([]net.Conn, 0, len(s.hijacked))
	for c := range s.hijacked {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var errs []error
	for _, c := range cs {
		if err := s.removeContainer(c, true); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	s.mu.Lock()
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// ServeHTTP answers an Engine API request (engineapi.Router).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.api.ServeHTTP(w, r)
}

func uname() (kernel, machine string) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "", runtime.GOARCH
	}
	return unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])
}

// SystemVersion is the stand-in's version and this kernel's.
func (s *Server) SystemVersion(context.Context) (any, error) {
	kernel, _ := uname()
	v := types.Version{
		Version: version.Version, APIVersion: APIVersion, MinAPIVersion: MinAPIVersion,
		GitCommit: version.Version, GoVersion: runtime.Version(), Os: runtime.GOOS, Arch: runtime.GOARCH,
		KernelVersion: kernel,
	}
	v.Platform.Name = "sealbench stand-in"
	v.Components = []types.ComponentVersion{{
		Name: "Engine", Version: version.Version,
		Details: map[string]string{
			"ApiVersion": APIVersion, "MinAPIVersion": MinAPIVersion, "GitCommit": version.Version,
			"GoVersion": runtime.Version(), "Os": runtime.GOOS, "Arch": runtime.GOARCH, "KernelVersion": kernel,
		},
	}}
	return v, nil
}

func osRelease() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

// SystemInfo is this machine's, with the stand-in's containers and images.
func (s *Server) SystemInfo(context.Context) (any, error) {
	kernel, machine := uname()
	var si syscall.Sysinfo_t
	syscall.Sysinfo(&si)
	host, _ := os.Hostname()
	s.mu.Lock()
	var running, stopped int
	for _, c := range s.containers {
		if c.state == stateRunning {
			running++
		} else {
			stopped++
		}
	}
	n := len(s.containers)
	s.mu.Unlock()
	info := system.Info{
		ID: s.id, Containers: n, ContainersRunning: running, ContainersStopped: stopped,
		Images: len(s.images.list()), Driver: "overlay", LoggingDriver: "standin", CgroupDriver: "none",
		KernelVersion: kernel, OperatingSystem: osRelease(), OSType: runtime.GOOS, Architecture: machine,
		NCPU: runtime.NumCPU(), MemTotal: int64(si.Totalram) * int64(si.Unit), DockerRootDir: s.state,
		Name: host, ServerVersion: version.Version, DefaultRuntime: "standin",
		SecurityOptions: []string{"name=seccomp,profile=standin", "name=no-new-privileges"},
		Labels:          []string{"org.sealbench.standin=true"},
	}
	info.Swarm.LocalNodeState = swarm.LocalNodeStateInactive
	return info, nil
}

// hijack takes over the connection for a raw stream, answering 101 when
// the client asked for an upgrade (the official client always does).
func (s *Server) hijack(w http.ResponseWriter, r *http.Request, contentType string) (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := engineapi.Hijack(w, r, contentType)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return nil, nil, errors.New("the stand-in is stopping")
	}
	s.hijacked[conn] = struct{}{}
	s.mu.Unlock()
	return conn, rw, nil
}

// endHijack half-closes the stream, so the client reads EOF, and forgets it.
func (s *Server) endHijack(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	conn.Close()
	s.mu.Lock()
	delete(s.hijacked, conn)
	s.mu.Unlock()
}
