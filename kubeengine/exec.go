package kubeengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/sealbench/sealbench/internal/engineapi"
)

// execRec is one exec instance; the fields after opts are guarded by
// Server.mu.
type execRec struct {
	ID   string
	c    *containerRec
	pod  string
	opts container.ExecOptions

	started  bool
	running  bool
	exitCode *int
	pid      int
}

// chrootPaths are where an image's coreutils chroot may be, in the order
// looked for.
var chrootPaths = []string{"/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot", "/bin/chroot"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ContainerExec keeps an exec of the running container's pod, to run at
// ExecStart.
func (s *Server) ContainerExec(ctx context.Context, ref string, body io.Reader) (any, error) {
	c, pod, err := s.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	var opts container.ExecOptions
	if err := engineapi.DecodeJSON(body, &opts); err != nil {
		return nil, fmt.Errorf("decoding the exec config: %w", err)
	}
	switch {
	case len(opts.Cmd) == 0:
		return nil, fmt.Errorf("%w: No exec command specified", errBadInput)
	case opts.Tty:
		return nil, fmt.Errorf("%w: kube-engine runs no exec with a TTY", errBadInput)
	case opts.Privileged && !c.HostConfig.Privileged:
		return nil, fmt.Errorf("%w: a privileged exec: Kubernetes cannot give one exec more privileges than its container (%s is not privileged)", errBadInput, c.Name)
	case opts.User != "" && strings.ContainsAny(opts.User, "'\n"):
		return nil, fmt.Errorf("%w: exec user %q", errBadInput, opts.User)
	}
	for _, e := range opts.Env {
		if k, _, _ := strings.Cut(e, "="); !envName.MatchString(k) {
			return nil, fmt.Errorf("%w: exec environment variable %q: kube-engine sets only NAME=VALUE with a shell name", errBadInput, e)
		}
	}
	if cs := sandboxStatus(pod); cs == nil || cs.State.Running == nil || pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: container %s is not running", errConflict, c.ID)
	}
	e := &execRec{ID: randomID(), c: c, pod: pod.Name, opts: opts}
	s.mu.Lock()
	s.execs[e.ID] = e
	s.mu.Unlock()
	return container.ExecCreateResponse{ID: e.ID}, nil
}

// ExecInspect is the exec's state, exit code and pid.
func (s *Server) ExecInspect(_ context.Context, id string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return nil, fmt.Errorf("%w: No such exec instance: %s", errNotFound, id)
	}
	code := 0
	if e.exitCode != nil {
		code = *e.exitCode
	}
	return container.ExecInspect{ExecID: e.ID, ContainerID: e.c.ID, Running: e.running, ExitCode: code, Pid: e.pid}, nil
}

// quote is v as one sh word.
func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

// wrapper is the sh script an exec runs (with its command as "$@"): it
// gives the exec subresource what it lacks. It cds to the working
// directory, exports the environment, prints its pid (the command's: it
// is exec'd) as the first line of stdout, and drops to the user with
// coreutils' chroot. A step that fails prints why on stdout, as dockerd
// does, and exits 126 before the pid line: an exec that never started.
func (e *execRec) wrapper() string {
	var b strings.Builder
	if d := e.opts.WorkingDir; d != "" {
		fmt.Fprintf(&b, "cd -- %s 2>/dev/null || { echo %s; exit 126; }\n", quote(d),
			quote(fmt.Sprintf("kube-engine: exec failed: chdir to cwd (%q): no such directory, or not one the user may enter", d)))
	}
	for _, kv := range e.opts.Env {
		fmt.Fprintf(&b, "export %s\n", quote(kv))
	}
	user := e.opts.User
	if user == e.c.Config.User {
		user = "" // the container's own: the exec subresource runs as it
	}
	if user != "" {
		// By path: busybox's sh runs its own chroot applet, which has
		// no --userspec, for a bare name.
		fmt.Fprintf(&b, "c=; for p in %s; do [ -x \"$p\" ] && c=$p && break; done\n", strings.Join(chrootPaths, " "))
		fmt.Fprintf(&b, "[ -n \"$c\" ] || { echo %s; exit 126; }\n",
			quote(fmt.Sprintf("kube-engine: exec failed: running an exec as user %s needs coreutils' chroot in the image (%s), which has none", user, strings.Join(chrootPaths, ", "))))
	}
	b.WriteString("echo $$\n")
	if user == "" {
		b.WriteString(`exec "$@"` + "\n")
		return b.String()
	}
	spec := "--userspec=" + quote(user)
	if _, g, ok := strings.Cut(user, ":"); ok {
		spec += " --groups=" + quote(g)
	}
	fmt.Fprintf(&b, `exec "$c" --skip-chdir %s / "$@"`+"\n", spec)
	return b.String()
}

// ExecStart runs the exec through the pod's exec subresource: detached,
// or spliced to the hijacked connection.
func (s *Server) ExecStart(w http.ResponseWriter, r *http.Request, id string) {
	var opts container.ExecStartOptions
	if r.ContentLength != 0 {
		if err := engineapi.DecodeJSON(r.Body, &opts); err != nil && !errors.Is(err, io.EOF) {
			engineapi.Fail(w, fmt.Errorf("decoding exec start: %w", err))
			return
		}
	}
	if opts.Tty {
		engineapi.Fail(w, fmt.Errorf("%w: kube-engine runs no exec with a TTY", errBadInput))
		return
	}
	s.mu.Lock()
	e, ok := s.execs[id]
	if !ok {
		s.mu.Unlock()
		engineapi.Fail(w, fmt.Errorf("%w: No such exec instance: %s", errNotFound, id))
		return
	}
	if e.started {
		s.mu.Unlock()
		engineapi.Fail(w, fmt.Errorf("%w: exec %s has already been started", errConflict, id))
		return
	}
	e.started, e.running = true, true
	s.mu.Unlock()

	if opts.Detach {
		go s.runExec(context.Background(), e, nil, io.Discard, io.Discard)
		engineapi.WriteJSON(w, http.StatusOK, struct{}{})
		return
	}
	conn, rw, err := engineapi.Hijack(w, r, "application/vnd.docker.multiplexed-stream")
	if err != nil {
		s.finishExec(e, 126)
		return
	}
	defer func() {
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		conn.Close()
	}()
	var wmu sync.Mutex
	stream := func(n byte, attached bool) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			if attached && len(p) > 0 {
				wmu.Lock()
				defer wmu.Unlock()
				conn.Write(engineapi.Frame(n, p)) // a client gone still lets the command finish
			}
			return len(p), nil
		})
	}
	var stdin io.Reader
	if e.opts.AttachStdin {
		stdin = rw.Reader
	}
	// The exit code is kept before the stream ends: clients inspect the
	// exec as soon as they read EOF.
	// The request's context ends with the hijack: a client that goes
	// away still lets the command finish.
	s.runExec(context.WithoutCancel(r.Context()), e, stdin, stream(1, e.opts.AttachStdout), stream(2, e.opts.AttachStderr))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// runExec runs e through the pod's exec subresource and keeps its exit
// code and pid.
func (s *Server) runExec(ctx context.Context, e *execRec, stdin io.Reader, stdout, stderr io.Writer) {
	out := &pidWriter{out: stdout}
	argv := append([]string{"/bin/sh", "-c", e.wrapper(), "kube-engine-exec"}, e.opts.Cmd...)
	err := s.stream(ctx, e.pod, argv, stdin, out, stderr)
	out.flush()
	s.mu.Lock()
	e.pid = out.pid
	s.mu.Unlock()
	code := 0
	var ee utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitStatus()
	default:
		code = 126
		if out.pid == 0 {
			stdout.Write([]byte("kube-engine: exec failed: " + err.Error() + "\n"))
		} else {
			stderr.Write([]byte("kube-engine: the exec's stream broke: " + err.Error() + "\n"))
		}
	}
	if out.pid == 0 && code != 126 {
		// The wrapper never printed its pid: /bin/sh itself could not run.
		code = 126
	}
	s.finishExec(e, code)
}

func (s *Server) finishExec(e *execRec, code int) {
	s.mu.Lock()
	e.running, e.exitCode = false, &code
	s.mu.Unlock()
}

// stream runs argv in the pod's container through the exec subresource:
// WebSocket, or SPDY from an API server without it.
func (s *Server) stream(ctx context.Context, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := s.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.c.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(s.rest, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.rest, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// pidWriter takes the wrapper's first stdout line, its pid, off the
// stream; what follows goes to out. A first line that is not a number is
// not the wrapper's (it failed before): it goes to out, and pid stays 0.
type pidWriter struct {
	out  io.Writer
	buf  []byte
	done bool
	pid  int
}

func (w *pidWriter) Write(p []byte) (int, error) {
	if w.done {
		return w.out.Write(p)
	}
	w.buf = append(w.buf, p...)
	i := bytes.IndexByte(w.buf, '\n')
	if i < 0 {
		if len(w.buf) > 32 {
			w.flush()
		}
		return len(p), nil
	}
	w.done = true
	rest := w.buf
	if n, err := strconv.Atoi(string(w.buf[:i])); err == nil && n > 0 {
		w.pid, rest = n, w.buf[i+1:]
	}
	w.buf = nil
	if len(rest) > 0 {
		w.out.Write(rest)
	}
	return len(p), nil
}

// flush passes on what is held back.
func (w *pidWriter) flush() {
	w.done = true
	if len(w.buf) > 0 {
		w.out.Write(w.buf)
		w.buf = nil
	}
}
