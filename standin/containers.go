//go:build linux

package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/standin/sandbox"
)

// Container states, as the Engine API names them.
const (
	stateCreated  = "created"
	stateRunning  = "running"
	stateExited   = "exited"
	stateRemoving = "removing"
)

// containerRec is one container. The fields after log are guarded by the
// Server's mu; the ones before it do not change after create.
type containerRec struct {
	ID, Name string
	Created  time.Time
	image    *imageRecord
	imageRef string
	config   container.Config
	host     container.HostConfig
	spec     sandbox.Spec
	dir      string
	log      *logFile

	// guarded by Server.mu
	state      string
	sb         *sandbox.Sandbox
	exitCode   int
	errMsg     string
	startedAt  time.Time
	finishedAt time.Time
	exitCh     chan struct{} // closed when the current (or next) run ends, then replaced
	removedCh  chan struct{}
	removeOnce sync.Once
	execIDs    []string
}

var nameRE = regexp.MustCompile(`^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// lookupContainer finds a container by full ID, name, or unique ID prefix.
func (s *Server) lookupContainer(ref string) (*containerRec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupLocked(ref)
}

func (s *Server) lookupLocked(ref string) (*containerRec, error) {
	if c, ok := s.containers[ref]; ok {
		return c, nil
	}
	name := strings.TrimPrefix(ref, "/")
	for _, c := range s.containers {
		if c.Name == name {
			return c, nil
		}
	}
	var found *containerRec
	if isHex(ref) {
		for id, c := range s.containers {
			if strings.HasPrefix(id, ref) {
				if found != nil {
					return nil, fmt.Errorf("%w: multiple IDs found with provided prefix: %s", ErrBadInput, ref)
				}
				found = c
			}
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: No such container: %s", ErrNotFound, ref)
	}
	return found, nil
}

// ContainerCreate makes a container of the create request in body: its
// Sandbox's spec and files, nothing running.
func (s *Server) ContainerCreate(_ context.Context, name string, body io.Reader) (any, error) {
	var req container.CreateRequest
	if err := engineapi.DecodeJSON(body, &req); err != nil {
		return nil, fmt.Errorf("decoding the container config: %w", err)
	}
	c, err := s.createContainer(name, &req)
	if err != nil {
		return nil, err
	}
	return container.CreateResponse{ID: c.ID, Warnings: []string{}}, nil
}

func (s *Server) createContainer(name string, req *container.CreateRequest) (*containerRec, error) {
	if req.Config == nil {
		return nil, fmt.Errorf("%w: config cannot be empty in order to create a container", ErrBadInput)
	}
	host := container.HostConfig{}
	if req.HostConfig != nil {
		host = *req.HostConfig
	}
	if name != "" && !nameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed", ErrBadInput, name)
	}
	if err := checkUnsupported(req.Config, &host); err != nil {
		return nil, err
	}
	img, err := s.images.resolve(req.Config.Image)
	if err != nil {
		return nil, err
	}
	cfg := mergeConfig(imageConfig(img), *req.Config)
	id := randomHex(32)
	if name == "" {
		name = "standin_" + id[:12]
	}
	name = strings.TrimPrefix(name, "/")
	if cfg.Hostname == "" {
		cfg.Hostname = id[:12]
	}
	// As dockerd does: HOSTNAME, and a PATH when the image has none.
	cfg.Env = mergeEnv([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + cfg.Hostname}, cfg.Env)
	args := append(append([]string(nil), cfg.Entrypoint...), cfg.Cmd...)
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: no command specified", ErrBadInput)
	}
	caps, err := sandbox.GrantedCaps(host.CapAdd, host.CapDrop, host.Privileged)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	seccomp := !host.Privileged
	for _, c := range caps {
		if c == unix.CAP_SYS_ADMIN {
			seccomp = false // Docker's default profile also allows mount and unshare then
		}
	}
	for _, o := range host.SecurityOpt {
		switch o {
		case "seccomp=unconfined", "seccomp:unconfined":
			seccomp = false
		case "no-new-privileges", "no-new-privileges=false", "no-new-privileges:false":
		default:
			return nil, fmt.Errorf("%w: SecurityOpt %q is not supported by the stand-in", ErrBadInput, o)
		}
	}
	mounts, err := sandboxMounts(&host)
	if err != nil {
		return nil, err
	}
	var devices []sandbox.Device
	for _, d := range host.Devices {
		in := d.PathInContainer
		if in == "" {
			in = d.PathOnHost
		}
		var st unix.Stat_t
		if err := unix.Stat(d.PathOnHost, &st); err != nil {
			return nil, fmt.Errorf("%w: checking device %q: %v", ErrBadInput, d.PathOnHost, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR {
			return nil, fmt.Errorf("%w: %q is not a character device", ErrBadInput, d.PathOnHost)
		}
		devices = append(devices, sandbox.Device{Host: d.PathOnHost, Container: in})
	}
	dir := filepath.Join(s.state, "containers", id)
	c := &containerRec{
		ID: id, Name: name, Created: time.Now().UTC(), image: img, imageRef: req.Config.Image,
		config: cfg, host: host, dir: dir, state: stateCreated,
		exitCh: make(chan struct{}), removedCh: make(chan struct{}),
	}
	mounts = append(mounts, etcMounts(dir, mounts)...)
	lowers := make([]string, 0, len(img.DiffIDs))
	for i := len(img.DiffIDs) - 1; i >= 0; i-- {
		lowers = append(lowers, s.images.layerDir(img.DiffIDs[i]))
	}
	if len(lowers) == 0 {
		// An image with no layers still needs a lower directory.
		lowers = append(lowers, filepath.Join(dir, "empty"))
	}
	c.spec = sandbox.Spec{
		ID: id, Hostname: cfg.Hostname,
		RootfsDir: filepath.Join(dir, "rootfs"), LowerDirs: lowers,
		UpperDir: filepath.Join(dir, "upper"), WorkDir: filepath.Join(dir, "work"),
		ReadonlyRootfs: host.ReadonlyRootfs, Mounts: mounts, Devices: devices,
		Caps: caps, Privileged: host.Privileged, Seccomp: seccomp,
		Process: sandbox.Process{Args: args, Env: cfg.Env, Cwd: cfg.WorkingDir, User: cfg.User},
	}
	if err := c.spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the stand-in is stopping")
	}
	if other, err := s.lookupLocked(name); err == nil && other.Name == name {
		return nil, fmt.Errorf("%w: Conflict. The container name \"/%s\" is already in use by container \"%s\". You have to remove (or rename) that container to be able to reuse that name", ErrConflict, name, other.ID)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating container directory %q: %w", dir, err)
	}
	for _, d := range []string{"rootfs", "upper", "work", "empty"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("creating container directory %q: %w", dir, err)
		}
	}
	if err := writeEtcFiles(dir, &cfg, &host); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lf, err := newLogFile(filepath.Join(dir, "log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.log = lf
	s.containers[id] = c
	return c, nil
}

// The files dockerd gives every container, bind-mounted over the image's.
var etcFiles = []string{"hosts", "hostname", "resolv.conf"}

// etcMounts binds the container's own /etc files, except where the caller
// mounts something there already.
func etcMounts(dir string, user []sandbox.Mount) []sandbox.Mount {
	var out []sandbox.Mount
outer:
	for _, f := range etcFiles {
		for _, m := range user {
			if m.Target == "/etc/"+f {
				continue outer
			}
		}
		out = append(out, sandbox.Mount{Type: "bind", Source: filepath.Join(dir, f), Target: "/etc/" + f})
	}
	return out
}

// writeEtcFiles writes the container's hosts, hostname and resolv.conf.
// There is no network but loopback, so there are no name servers.
func writeEtcFiles(dir string, cfg *container.Config, host *container.HostConfig) error {
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + cfg.Hostname + "\n"
	for _, e := range host.ExtraHosts {
		name, ip, ok := strings.Cut(e, ":")
		if !ok {
			return fmt.Errorf("%w: ExtraHosts entry %q: want NAME:IP", ErrBadInput, e)
		}
		hosts += ip + "\t" + name + "\n"
	}
	for f, body := range map[string]string{
		"hosts": hosts, "hostname": cfg.Hostname + "\n",
		"resolv.conf": "# The sealbench stand-in: a Sandbox has loopback only, so no name servers.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			return fmt.Errorf("writing the container's /etc/%s: %w", f, err)
		}
	}
	return nil
}

// checkUnsupported refuses what the stand-in would otherwise silently run
// differently from dockerd.
func checkUnsupported(cfg *container.Config, h *container.HostConfig) error {
	var bad []string
	switch h.NetworkMode {
	case "", "none":
	default:
		bad = append(bad, fmt.Sprintf("NetworkMode %q (every Sandbox has loopback only: use none)", h.NetworkMode))
	}
	if cfg.Tty {
		bad = append(bad, "Tty")
	}
	if cfg.OpenStdin {
		bad = append(bad, "OpenStdin")
	}
	if len(h.PortBindings) > 0 || len(cfg.ExposedPorts) > 0 && h.PublishAllPorts {
		bad = append(bad, "published ports")
	}
	if h.PidMode != "" || h.IpcMode != "" && h.IpcMode != "private" && h.IpcMode != "shareable" || h.UTSMode != "" || h.UsernsMode != "" || h.CgroupnsMode == "host" {
		bad = append(bad, "host or shared namespaces (PidMode, IpcMode, UTSMode, UsernsMode, CgroupnsMode)")
	}
	if len(h.VolumesFrom) > 0 || len(h.Links) > 0 {
		bad = append(bad, "VolumesFrom and Links")
	}
	res := h.Resources
	if res.Memory != 0 || res.NanoCPUs != 0 || res.CPUShares != 0 || res.CPUQuota != 0 || res.CpusetCpus != "" || (res.PidsLimit != nil && *res.PidsLimit > 0) {
		bad = append(bad, "resource limits (the stand-in has no cgroups)")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: the stand-in does not support: %s", ErrBadInput, strings.Join(bad, "; "))
	}
	return nil
}

// mergeConfig lays the request over the image's config as dockerd does.
func mergeConfig(img, req container.Config) container.Config {
	out := req
	if req.Entrypoint == nil {
		out.Entrypoint = img.Entrypoint
		if len(req.Cmd) == 0 {
			out.Cmd = img.Cmd
		}
	}
	out.Env = mergeEnv(img.Env, req.Env)
	if out.WorkingDir == "" {
		out.WorkingDir = img.WorkingDir
	}
	if out.WorkingDir == "" {
		out.WorkingDir = "/"
	}
	if out.User == "" {
		out.User = img.User
	}
	labels := map[string]string{}
	for k, v := range img.Labels {
		labels[k] = v
	}
	for k, v := range req.Labels {
		labels[k] = v
	}
	out.Labels = labels
	return out
}

// mergeEnv lays over's variables over base's, keeping base's order.
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	var out []string
	for _, e := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := idx[k]; ok {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}

// sandboxMounts turns Binds, Mounts and Tmpfs into the Sandbox's mounts.
func sandboxMounts(h *container.HostConfig) ([]sandbox.Mount, error) {
	var out []sandbox.Mount
	targets := map[string]bool{}
	add := func(m sandbox.Mount) error {
		m.Target = path.Clean(m.Target)
		if !path.IsAbs(m.Target) || m.Target == "/" {
			return fmt.Errorf("%w: mount target %q must be an absolute path other than /", ErrBadInput, m.Target)
		}
		if targets[m.Target] {
			return fmt.Errorf("%w: duplicate mount point: %s", ErrBadInput, m.Target)
		}
		targets[m.Target] = true
		out = append(out, m)
		return nil
	}
	for _, b := range h.Binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("%w: invalid bind %q: want SOURCE:TARGET[:OPTIONS]", ErrBadInput, b)
		}
		if !filepath.IsAbs(parts[0]) {
			return nil, fmt.Errorf("%w: bind %q: named volumes are not supported; give an absolute host path", ErrBadInput, b)
		}
		m := sandbox.Mount{Type: "bind", Source: parts[0], Target: parts[1], Recursive: true}
		if len(parts) == 3 {
			for _, o := range strings.Split(parts[2], ",") {
				switch o {
				case "ro":
					m.ReadOnly = true
				case "rw", "z", "Z", "rprivate", "private", "":
				default:
					return nil, fmt.Errorf("%w: bind %q: option %q is not supported", ErrBadInput, b, o)
				}
			}
		}
		// As dockerd does for Binds: a missing source directory is created.
		if _, err := os.Stat(m.Source); os.IsNotExist(err) {
			if err := os.MkdirAll(m.Source, 0o755); err != nil {
				return nil, fmt.Errorf("creating bind source %q: %w", m.Source, err)
			}
		}
		if err := add(m); err != nil {
			return nil, err
		}
	}
	for _, mm := range h.Mounts {
		switch mm.Type {
		case mount.TypeBind:
			if _, err := os.Stat(mm.Source); err != nil {
				return nil, fmt.Errorf("%w: invalid mount config for type \"bind\": bind source path does not exist: %s", ErrBadInput, mm.Source)
			}
			m := sandbox.Mount{Type: "bind", Source: mm.Source, Target: mm.Target, ReadOnly: mm.ReadOnly, Recursive: true}
			if mm.BindOptions != nil && mm.BindOptions.NonRecursive {
				m.Recursive = false
			}
			if err := add(m); err != nil {
				return nil, err
			}
		case mount.TypeTmpfs:
			m := sandbox.Mount{Type: "tmpfs", Target: mm.Target, ReadOnly: mm.ReadOnly}
			if o := mm.TmpfsOptions; o != nil {
				if o.SizeBytes > 0 {
					m.Size = strconv.FormatInt(o.SizeBytes, 10)
				}
				if o.Mode != 0 {
					mode := uint64(o.Mode.Perm())
					if o.Mode&os.ModeSticky != 0 {
						mode |= 0o1000
					}
					if o.Mode&os.ModeSetgid != 0 {
						mode |= 0o2000
					}
					if o.Mode&os.ModeSetuid != 0 {
						mode |= 0o4000
					}
					m.Mode = strconv.FormatUint(mode, 8)
				}
			}
			if err := add(m); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: mount type %q is not supported by the stand-in (bind and tmpfs are)", ErrBadInput, mm.Type)
		}
	}
	targetsSorted := make([]string, 0, len(h.Tmpfs))
	for t := range h.Tmpfs {
		targetsSorted = append(targetsSorted, t)
	}
	sort.Strings(targetsSorted)
	for _, t := range targetsSorted {
		m := sandbox.Mount{Type: "tmpfs", Target: t}
		for _, o := range strings.Split(h.Tmpfs[t], ",") {
			k, v, _ := strings.Cut(o, "=")
			switch k {
			case "":
			case "size":
				n, err := units.RAMInBytes(v)
				if err != nil {
					return nil, fmt.Errorf("%w: tmpfs %s: size %q: %v", ErrBadInput, t, v, err)
				}
				m.Size = strconv.FormatInt(n, 10)
			case "mode":
				if _, err := strconv.ParseUint(v, 8, 32); err != nil {
					return nil, fmt.Errorf("%w: tmpfs %s: mode %q is not octal", ErrBadInput, t, v)
				}
				m.Mode = v
			case "ro":
				m.ReadOnly = true
			case "rw", "nosuid", "nodev", "exec", "noexec":
				// nosuid and nodev always hold; exec is allowed either way.
			default:
				return nil, fmt.Errorf("%w: tmpfs %s: option %q is not supported", ErrBadInput, t, o)
			}
		}
		if err := add(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ContainerStart starts the container's Sandbox; false when it was
// running already.
func (s *Server) ContainerStart(_ context.Context, id string) (bool, error) {
	c, err := s.lookupContainer(id)
	if err != nil {
		return false, err
	}
	return s.startContainer(c)
}

// startContainer starts c's Sandbox; false when it was running already.
func (s *Server) startContainer(c *containerRec) (bool, error) {
	s.mu.Lock()
	if c.state == stateRunning {
		s.mu.Unlock()
		return false, nil
	}
	if c.state == stateRemoving || s.closed {
		s.mu.Unlock()
		return false, fmt.Errorf("%w: container %s is being removed", ErrConflict, c.ID)
	}
	c.state = stateRunning // held against a concurrent start while the Sandbox starts
	s.mu.Unlock()

	or, ow, err := os.Pipe()
	if err != nil {
		return false, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		or.Close()
		ow.Close()
		return false, err
	}
	sb, err := sandbox.Start(&c.spec, ow, ew)
	ow.Close()
	ew.Close()
	if err != nil {
		or.Close()
		er.Close()
		s.mu.Lock()
		if c.state != stateRemoving {
			c.state = stateExited
		}
		c.exitCode, c.errMsg = 128, err.Error()
		c.finishedAt = time.Now().UTC()
		exitCh := c.exitCh
		c.exitCh = make(chan struct{})
		s.mu.Unlock()
		c.log.release()
		close(exitCh) // waiters for this run: it ended before it began
		return false, fmt.Errorf("starting container %s: %w", c.ID[:12], err)
	}
	s.mu.Lock()
	c.sb, c.startedAt, c.errMsg, c.exitCode = sb, time.Now().UTC(), "", 0
	exitCh := c.exitCh
	s.mu.Unlock()

	copied := c.log.copyStreams(or, er)
	go func() {
		<-sb.Done()
		<-copied
		s.mu.Lock()
		if c.state != stateRemoving {
			c.state = stateExited
		}
		c.exitCode, c.finishedAt = sb.Status(), time.Now().UTC()
		c.exitCh = make(chan struct{})
		auto := c.host.AutoRemove
		s.mu.Unlock()
		close(exitCh)
		if auto {
			if err := s.removeContainer(c, true); err != nil {
				s.logf("auto-removing container %s: %v", c.ID[:12], err)
			}
		}
	}()
	return true, nil
}

// ContainerStop signals the container's Sandbox (SIGTERM, or its stop
// signal) and kills it when it has not exited after the timeout (10 s);
// false when it was not running.
func (s *Server) ContainerStop(_ context.Context, id string, opts engineapi.StopOptions) (bool, error) {
	c, err := s.lookupContainer(id)
	if err != nil {
		return false, err
	}
	timeout := 10 * time.Second
	if opts.Timeout != nil {
		timeout = *opts.Timeout
	}
	sig := syscall.SIGTERM
	if c.config.StopSignal != "" {
		if sg, err := parseSignal(c.config.StopSignal); err == nil {
			sig = sg
		}
	}
	if opts.Signal != "" {
		if sig, err = parseSignal(opts.Signal); err != nil {
			return false, err
		}
	}
	s.mu.Lock()
	sb, running, exitCh := c.sb, c.state == stateRunning, c.exitCh
	s.mu.Unlock()
	if !running || sb == nil {
		return false, nil
	}
	if timeout < 0 {
		timeout = 0
	}
	sb.Signal(sig)
	select {
	case <-exitCh:
	case <-time.After(timeout):
		sb.Kill()
		<-exitCh
	}
	return true, nil
}

// ContainerKill sends the container's Sandbox signal (SIGKILL for "").
func (s *Server) ContainerKill(_ context.Context, id, signal string) error {
	c, err := s.lookupContainer(id)
	if err != nil {
		return err
	}
	sig := syscall.SIGKILL
	if signal != "" {
		if sig, err = parseSignal(signal); err != nil {
			return err
		}
	}
	s.mu.Lock()
	sb, running := c.sb, c.state == stateRunning
	s.mu.Unlock()
	if !running || sb == nil {
		return fmt.Errorf("%w: container %s is not running", ErrConflict, c.ID)
	}
	if sig == syscall.SIGKILL {
		return sb.Kill()
	}
	return sb.Signal(sig)
}

func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig := unix.SignalNum("SIG" + name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("%w: invalid signal: %s", ErrBadInput, s)
}

// ContainerWait waits for the container's condition: not-running (the
// default), next-exit or removed.
func (s *Server) ContainerWait(w http.ResponseWriter, r *http.Request, id string) {
	c, err := s.lookupContainer(id)
	if err != nil {
		engineapi.Fail(w, err)
		return
	}
	cond := r.URL.Query().Get("condition")
	s.mu.Lock()
	var ch chan struct{}
	switch cond {
	case "", string(container.WaitConditionNotRunning):
		if c.state == stateRunning {
			ch = c.exitCh
		}
	case string(container.WaitConditionNextExit):
		ch = c.exitCh
	case string(container.WaitConditionRemoved):
		ch = c.removedCh
	default:
		s.mu.Unlock()
		engineapi.Fail(w, fmt.Errorf("%w: invalid condition: %q", ErrBadInput, cond))
		return
	}
	s.mu.Unlock()
	// Headers now: the official client returns from ContainerWait only once
	// they arrive, and the CLI starts the container after that.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if ch != nil {
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	resp := container.WaitResponse{StatusCode: int64(c.exitCode)}
	if c.errMsg != "" {
		resp.Error = &container.WaitExitError{Message: c.errMsg}
	}
	s.mu.Unlock()
	json.NewEncoder(w).Encode(resp)
}

// ContainerDelete removes the container (removeContainer).
func (s *Server) ContainerDelete(_ context.Context, id string, force bool) error {
	c, err := s.lookupContainer(id)
	if err != nil {
		return err
	}
	// v=1 (remove anonymous volumes) needs nothing: the stand-in makes none.
	return s.removeContainer(c, force)
}

// removeContainer removes c, killing its Sandbox first when force is set,
// and waits until the Sandbox is gone before removing its files.
func (s *Server) removeContainer(c *containerRec, force bool) error {
	s.mu.Lock()
	if _, ok := s.containers[c.ID]; !ok || c.state == stateRemoving {
		s.mu.Unlock()
		if force {
			<-c.removedCh
			return nil
		}
		return fmt.Errorf("%w: removal of container %s is already in progress", ErrConflict, c.ID[:12])
	}
	if c.state == stateRunning && !force {
		s.mu.Unlock()
		return fmt.Errorf("%w: cannot remove container \"/%s\": container is running: stop the container before removing or force remove", ErrConflict, c.Name)
	}
	if c.state == stateRunning && c.sb == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: container %s is starting; remove it once it has started", ErrConflict, c.ID[:12])
	}
	sb, exitCh, running := c.sb, c.exitCh, c.state == stateRunning
	c.state = stateRemoving
	s.mu.Unlock()
	var errs []error
	if running && sb != nil {
		if err := sb.Kill(); err != nil {
			errs = append(errs, err)
		}
		<-exitCh
	}
	if err := c.log.close(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing container files %q: %w", c.dir, err))
	}
	s.mu.Lock()
	delete(s.containers, c.ID)
	close(c.exitCh) // there is no next run: "next-exit" waiters get the last one
	for _, e := range c.execIDs {
		delete(s.execs, e)
	}
	users := map[manifests.Digest]int{}
	for _, o := range s.containers {
		users[o.image.ID]++
	}
	s.mu.Unlock()
	if err := s.images.gcLayers(c.image, func(d manifests.Digest) bool { return users[d] > 0 }); err != nil {
		errs = append(errs, err)
	}
	c.removeOnce.Do(func() { close(c.removedCh) })
	if len(errs) > 0 {
		return fmt.Errorf("removing container %s: %w", c.ID[:12], errors.Join(errs...))
	}
	return nil
}

// ContainerInspect is the container as dockerd describes one.
func (s *Server) ContainerInspect(_ context.Context, id string) (any, error) {
	c, err := s.lookupContainer(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	st := &container.State{
		Status: c.state, Running: c.state == stateRunning, ExitCode: c.exitCode, Error: c.errMsg,
		StartedAt: timeOrZero(c.startedAt), FinishedAt: timeOrZero(c.finishedAt),
	}
	if c.state == stateRemoving {
		st.Status = stateRemoving
	}
	if c.sb != nil && c.state == stateRunning {
		st.Pid = c.sb.Pid
	}
	execIDs := append([]string(nil), c.execIDs...)
	s.mu.Unlock()
	cfg := c.config
	host := c.host
	resp := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{
			ID: c.ID, Created: c.Created.Format(time.RFC3339Nano), Path: c.spec.Process.Args[0], Args: c.spec.Process.Args[1:],
			State: st, Image: c.image.ID.String(), Name: "/" + c.Name, Driver: "overlay", Platform: "linux",
			LogPath: c.log.path, ExecIDs: execIDs, HostConfig: &host,
			HostsPath: filepath.Join(c.dir, "hosts"), HostnamePath: filepath.Join(c.dir, "hostname"),
			ResolvConfPath: filepath.Join(c.dir, "resolv.conf"),
		},
		Mounts:          mountPoints(c),
		Config:          &cfg,
		NetworkSettings: &container.NetworkSettings{},
	}
	return resp, nil
}

func timeOrZero(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00Z"
	}
	return t.Format(time.RFC3339Nano)
}

func mountPoints(c *containerRec) []container.MountPoint {
	out := []container.MountPoint{}
	for _, m := range c.spec.Mounts {
		out = append(out, container.MountPoint{
			Type: mount.Type(m.Type), Source: m.Source, Destination: m.Target, RW: !m.ReadOnly,
		})
	}
	return out
}

// ContainerList lists the running containers, or all of them, newest
// first, filtered by label, id, name, status or ancestor.
func (s *Server) ContainerList(_ context.Context, all bool, filter string) (any, error) {
	args, err := filters.FromJSON(filter)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if err := args.Validate(map[string]bool{"label": true, "id": true, "name": true, "status": true, "ancestor": true}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	s.mu.Lock()
	var cs []*containerRec
	for _, c := range s.containers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Created.After(cs[j].Created) })
	out := []container.Summary{}
	for _, c := range cs {
		if !all && c.state != stateRunning && !args.Contains("status") {
			continue
		}
		if args.Contains("label") && !args.MatchKVList("label", c.config.Labels) {
			continue
		}
		if args.Contains("id") && !args.Match("id", c.ID) {
			continue
		}
		if args.Contains("name") && !args.Match("name", c.Name) && !args.Match("name", "/"+c.Name) {
			continue
		}
		if args.Contains("status") && !args.ExactMatch("status", c.state) {
			continue
		}
		if args.Contains("ancestor") && !args.ExactMatch("ancestor", c.imageRef) && !args.ExactMatch("ancestor", c.image.ID.String()) {
			continue
		}
		sum := container.Summary{
			ID: c.ID, Names: []string{"/" + c.Name}, Image: c.imageRef, ImageID: c.image.ID.String(),
			Command: strings.Join(c.spec.Process.Args, " "), Created: c.Created.Unix(), Ports: []container.Port{},
			Labels: c.config.Labels, State: c.state, Status: statusText(c), Mounts: mountPoints(c),
			NetworkSettings: &container.NetworkSettingsSummary{},
		}
		sum.HostConfig.NetworkMode = string(c.host.NetworkMode)
		out = append(out, sum)
	}
	s.mu.Unlock()
	return out, nil
}

// statusText is the human status `docker ps` shows; s.mu is held.
func statusText(c *containerRec) string {
	switch c.state {
	case stateRunning:
		return "Up " + units.HumanDuration(time.Since(c.startedAt))
	case stateExited:
		return fmt.Sprintf("Exited (%d) %s ago", c.exitCode, units.HumanDuration(time.Since(c.finishedAt)))
	case stateRemoving:
		return "Removal In Progress"
	}
	return "Created"
}

// ContainerLogs streams the container's output as it was kept, and with
// follow what comes until its run ends.
func (s *Server) ContainerLogs(w http.ResponseWriter, r *http.Request, id string) {
	c, err := s.lookupContainer(id)
	if err != nil {
		engineapi.Fail(w, err)
		return
	}
	if engineapi.BoolParam(r, "timestamps") {
		engineapi.Fail(w, fmt.Errorf("%w: logs with timestamps", engineapi.ErrNotImplemented))
		return
	}
	if t := r.URL.Query().Get("tail"); t != "" && t != "all" {
		engineapi.Fail(w, fmt.Errorf("%w: logs with tail=%s", engineapi.ErrNotImplemented, t))
		return
	}
	stdout, stderr := engineapi.BoolParam(r, "stdout"), engineapi.BoolParam(r, "stderr")
	if !stdout && !stderr {
		engineapi.Fail(w, fmt.Errorf("%w: you must choose at least one stream", ErrBadInput))
		return
	}
	follow := engineapi.BoolParam(r, "follow")
	w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var off int64
	for {
		s.mu.Lock()
		running, exitCh := c.state == stateRunning, c.exitCh
		s.mu.Unlock()
		changed := c.log.changed()
		n, err := c.log.copyFrames(w, off, stdout, stderr)
		off += n
		if err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		if !follow || !running {
			return
		}
		select {
		case <-changed:
		case <-exitCh:
		case <-r.Context().Done():
			return
		}
	}
}

// ContainerAttach streams the container's output (stdin is not
// supported: containers never have OpenStdin) until its next run ends.
func (s *Server) ContainerAttach(w http.ResponseWriter, r *http.Request, id string) {
	c, err := s.lookupContainer(id)
	if err != nil {
		engineapi.Fail(w, err)
		return
	}
	if engineapi.BoolParam(r, "logs") {
		engineapi.Fail(w, fmt.Errorf("%w: attach with logs=1", engineapi.ErrNotImplemented))
		return
	}
	stdout, stderr := engineapi.BoolParam(r, "stdout"), engineapi.BoolParam(r, "stderr")
	// Subscribe before answering: the CLI starts the container as soon
	// as the attach is answered, and output may come at once.
	s.mu.Lock()
	exited := c.state == stateExited || c.state == stateRemoving
	s.mu.Unlock()
	var sub *subscriber
	if !exited {
		sub = c.log.subscribe(&bytes.Buffer{}, stdout, stderr)
	}
	conn, _, err := s.hijack(w, r, "application/vnd.docker.multiplexed-stream")
	if err != nil {
		if sub != nil {
			c.log.unsubscribe(sub)
		}
		s.logf("attach to %s: %v", c.ID[:12], err)
		return
	}
	defer s.endHijack(conn)
	if sub == nil {
		return
	}
	c.log.connect(sub, conn)
	// Not reading: the CLI half-closes its side when it has no stdin to
	// send, so EOF there does not mean it went away. A client that went
	// away fails the next write, which ends the subscription.
	<-sub.done
}

// logFile keeps a container's output as multiplexed frames (the
// format `docker logs` receives), and feeds attached clients.
type logFile struct {
	path string

	mu     sync.Mutex
	f      *os.File
	subs   []*subscriber
	notify chan struct{} // closed and replaced on every write
}

type subscriber struct {
	w              io.Writer
	stdout, stderr bool
	done           chan struct{}
}

func newLogFile(p string) (*logFile, error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating container log: %w", err)
	}
	return &logFile{path: p, f: f, notify: make(chan struct{})}, nil
}

func (l *logFile) changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.notify
}

func (l *logFile) subscribe(w io.Writer, stdout, stderr bool) *subscriber {
	sub := &subscriber{w: w, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	l.mu.Lock()
	l.subs = append(l.subs, sub)
	l.mu.Unlock()
	return sub
}

func (l *logFile) unsubscribe(sub *subscriber) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.subs {
		if s == sub {
			l.subs = append(l.subs[:i], l.subs[i+1:]...)
			return
		}
	}
}

// connect points a subscriber, which has buffered what came so far, at
// its connection.
func (l *logFile) connect(sub *subscriber, w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if buf, ok := sub.w.(*bytes.Buffer); ok {
		w.Write(buf.Bytes())
	}
	sub.w = w
}

// release ends every attached stream: the run they waited for is over.
func (l *logFile) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.subs {
		close(s.done)
	}
	l.subs = nil
}

// copyStreams copies a run's stdout and stderr into the log and to the
// subscribers; the returned channel closes when both reach EOF, and the
// subscribers are released then.
func (l *logFile) copyStreams(stdout, stderr *os.File) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, f := range []*os.File{stdout, stderr} {
		wg.Add(1)
		go func(stream byte, f *os.File) {
			defer wg.Done()
			defer f.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := f.Read(buf)
				if n > 0 {
					l.write(stream, buf[:n])
				}
				if err != nil {
					return
				}
			}
		}(byte(i+1), f)
	}
	go func() {
		wg.Wait()
		l.release()
		close(done)
	}()
	return done
}

func (l *logFile) write(stream byte, p []byte) {
	fr := engineapi.Frame(stream, p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Write(fr)
	}
	kept := l.subs[:0]
	for _, s := range l.subs {
		if (stream == 1 && !s.stdout) || (stream == 2 && !s.stderr) {
			kept = append(kept, s)
			continue
		}
		if _, err := s.w.Write(fr); err != nil {
			close(s.done) // the client went away
			continue
		}
		kept = append(kept, s)
	}
	l.subs = kept
	close(l.notify)
	l.notify = make(chan struct{})
}

// copyFrames writes the log's frames from off on, keeping the chosen
// streams, and returns how many bytes of the log it consumed.
func (l *logFile) copyFrames(w io.Writer, off int64, stdout, stderr bool) (int64, error) {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	if f == nil {
		return 0, nil
	}
	var n int64
	hdr := make([]byte, 8)
	for {
		if _, err := f.ReadAt(hdr, off+n); err != nil {
			return n, nil // EOF, or a frame still being written
		}
		size := int64(hdr[4])<<24 | int64(hdr[5])<<16 | int64(hdr[6])<<8 | int64(hdr[7])
		body := make([]byte, size)
		if _, err := f.ReadAt(body, off+n+8); err != nil {
			return n, nil
		}
		if (hdr[0] == 1 && stdout) || (hdr[0] == 2 && stderr) {
			if _, err := w.Write(append(hdr, body...)); err != nil {
				return n, err
			}
		}
		n += 8 + size
	}
}

func (l *logFile) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
