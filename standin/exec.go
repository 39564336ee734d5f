//go:build linux

package standin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/standin/sandbox"
)

// execRec is one exec instance. Fields after opts are guarded by Server.mu.
type execRec struct {
	ID   string
	c    *containerRec
	opts container.ExecOptions

	started  bool
	running  bool
	exitCode *int
	pid      int
	// commandNanos is how long the process ran inside the Sandbox, from
	// its fork to its reaping: the command's own time, which per-exec
	// overhead is measured against.
	commandNanos int64
}

// execJSON is GET /exec/{id}/json, dockerd's shape plus one field of the
// stand-in's own (clients ignore fields they do not know).
type execJSON struct {
	ID            string
	Running       bool
	ExitCode      *int
	ProcessConfig struct {
		Privileged bool     `json:"privileged"`
		User       string   `json:"user"`
		Tty        bool     `json:"tty"`
		Entrypoint string   `json:"entrypoint"`
		Arguments  []string `json:"arguments"`
	}
	OpenStdin   bool
	OpenStderr  bool
	OpenStdout  bool
	CanRemove   bool
	ContainerID string
	DetachKeys  string
	Pid         int
	// StandinCommandNanoseconds is the process's own run time inside the
	// Sandbox (fork to reap), so that a client can subtract it from
	// its round trip to get the per-exec overhead.
	StandinCommandNanoseconds int64 `json:",omitempty"`
}

// ContainerExec keeps an exec of the running container, to run at
// ExecStart.
func (s *Server) ContainerExec(_ context.Context, id string, body io.Reader) (any, error) {
	c, err := s.lookupContainer(id)
	if err != nil {
		return nil, err
	}
	var opts container.ExecOptions
	if err := engineapi.DecodeJSON(body, &opts); err != nil {
		return nil, fmt.Errorf("decoding exec config: %w", err)
	}
	if len(opts.Cmd) == 0 {
		return nil, fmt.Errorf("%w: No exec command specified", ErrBadInput)
	}
	if opts.Tty {
		return nil, fmt.Errorf("%w: exec with a TTY", engineapi.ErrNotImplemented)
	}
	e := &execRec{ID: randomHex(32), c: c, opts: opts}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.state != stateRunning {
		return nil, fmt.Errorf("%w: container %s is not running", ErrConflict, c.ID)
	}
	s.execs[e.ID] = e
	c.execIDs = append(c.execIDs, e.ID)
	s.pruneExecsLocked(c)
	return container.ExecCreateResponse{ID: e.ID}, nil
}

// maxExecRecords bounds the exec records kept per container: a runner may
// exec thousands of times into one Sandbox. The oldest finished ones go.
const maxExecRecords = 1024

// pruneExecsLocked forgets c's oldest finished execs beyond
// maxExecRecords; s.mu is held.
func (s *Server) pruneExecsLocked(c *containerRec) {
	excess := len(c.execIDs) - maxExecRecords
	if excess <= 0 {
		return
	}
	kept := c.execIDs[:0]
	for _, id := range c.execIDs {
		if e := s.execs[id]; excess > 0 && (e == nil || (e.started && !e.running)) {
			delete(s.execs, id)
			excess--
			continue
		}
		kept = append(kept, id)
	}
	c.execIDs = kept
}

// ExecInspect is the exec as dockerd describes one, with the time its
// process ran inside the Sandbox.
func (s *Server) ExecInspect(_ context.Context, id string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return nil, fmt.Errorf("%w: No such exec instance: %s", ErrNotFound, id)
	}
	var out execJSON
	out.ID, out.Running, out.ExitCode, out.Pid = e.ID, e.running, e.exitCode, e.pid
	out.ProcessConfig.Privileged, out.ProcessConfig.User = e.opts.Privileged, e.opts.User
	out.ProcessConfig.Entrypoint, out.ProcessConfig.Arguments = e.opts.Cmd[0], e.opts.Cmd[1:]
	out.OpenStdin, out.OpenStdout, out.OpenStderr = e.opts.AttachStdin, e.opts.AttachStdout, e.opts.AttachStderr
	out.ContainerID, out.DetachKeys = e.c.ID, e.opts.DetachKeys
	out.StandinCommandNanoseconds = e.commandNanos
	return out, nil
}

// process is what the exec runs: the container's environment and working
// directory under the exec's own.
func (e *execRec) process() *sandbox.Process {
	cfg := e.c.config
	env := append(append([]string(nil), cfg.Env...), e.opts.Env...)
	cwd := e.opts.WorkingDir
	if cwd == "" {
		cwd = cfg.WorkingDir
	}
	user := e.opts.User
	if user == "" {
		user = cfg.User
	}
	return &sandbox.Process{Args: e.opts.Cmd, Env: env, Cwd: cwd, User: user, Privileged: e.opts.Privileged}
}

// ExecStart runs the exec in the container's Sandbox: detached, or with
// its stdio on the hijacked connection.
func (s *Server) ExecStart(w http.ResponseWriter, r *http.Request, id string) {
	var opts container.ExecStartOptions
	if r.ContentLength != 0 {
		if err := engineapi.DecodeJSON(r.Body, &opts); err != nil && !errors.Is(err, io.EOF) {
			engineapi.Fail(w, fmt.Errorf("decoding exec start: %w", err))
			return
		}
	}
	if opts.Tty {
		engineapi.Fail(w, fmt.Errorf("%w: exec with a TTY", engineapi.ErrNotImplemented))
		return
	}
	s.mu.Lock()
	e, ok := s.execs[id]
	if !ok {
		s.mu.Unlock()
		engineapi.Fail(w, fmt.Errorf("%w: No such exec instance: %s", ErrNotFound, id))
		return
	}
	if e.started {
		s.mu.Unlock()
		engineapi.Fail(w, fmt.Errorf("%w: exec %s has already been started", ErrConflict, id))
		return
	}
	sb := e.c.sb
	if e.c.state != stateRunning || sb == nil {
		s.mu.Unlock()
		engineapi.Fail(w, fmt.Errorf("%w: container %s is not running", ErrConflict, e.c.ID))
		return
	}
	e.started, e.running = true, true
	s.mu.Unlock()

	if opts.Detach {
		s.execDetached(w, e, sb)
		return
	}
	proc, inW, or, er, startErr := s.startAttached(e, sb)
	conn, rw, err := s.hijack(w, r, "application/vnd.docker.multiplexed-stream")
	if err != nil {
		for _, f := range []*os.File{inW, or, er} {
			if f != nil {
				f.Close()
			}
		}
		if startErr == nil {
			go s.finishExec(e, proc, nil)
		} else {
			s.execFailed(e, execStatus(startErr))
		}
		return
	}
	defer s.endHijack(conn)
	var wmu sync.Mutex
	send := func(stream byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := conn.Write(engineapi.Frame(stream, p))
		return err
	}
	if startErr != nil {
		// dockerd reports a failed exec on the stream and in the exit code.
		send(2, []byte("standin: exec failed: "+startErr.Error()+"\n"))
		s.execFailed(e, execStatus(startErr))
		return
	}
	if inW != nil {
		go func() {
			io.Copy(inW, rw.Reader)
			inW.Close()
		}()
	}
	var wg sync.WaitGroup
	for i, f := range []*os.File{or, er} {
		attached := e.opts.AttachStdout
		if i == 1 {
			attached = e.opts.AttachStderr
		}
		wg.Add(1)
		go func(stream byte, f *os.File, attached bool) {
			defer wg.Done()
			defer f.Close()
			buf := streamBufs.Get().(*[32 << 10]byte)
			defer streamBufs.Put(buf)
			for {
				n, err := f.Read(buf[:])
				if n > 0 && attached {
					send(stream, buf[:n]) // a client that went away still lets the process finish
				}
				if err != nil {
					return
				}
			}
		}(byte(i+1), f, attached)
	}
	// The exit code is recorded before the stream ends: clients inspect
	// the exec as soon as they read EOF.
	s.finishExec(e, proc, &wg)
}

// startAttached starts e's process with its stdio on pipes and returns
// the ends the stand-in keeps: stdin's writer (nil unless attached), the
// readers of stdout and stderr.
func (s *Server) startAttached(e *execRec, sb *sandbox.Sandbox) (proc *sandbox.Proc, inW, or, er *os.File, err error) {
	var ow, ew, inR *os.File
	closeAll := func() {
		for _, f := range []*os.File{or, ow, er, ew, inR, inW} {
			if f != nil {
				f.Close()
			}
		}
	}
	if or, ow, err = pipe(true); err != nil {
		return nil, nil, nil, nil, err
	}
	if er, ew, err = pipe(true); err != nil {
		closeAll()
		return nil, nil, nil, nil, err
	}
	if e.opts.AttachStdin {
		if inR, inW, err = pipe(false); err != nil {
			closeAll()
			return nil, nil, nil, nil, err
		}
	}
	if proc, err = sb.Exec(e.process(), inR, ow, ew); err != nil {
		closeAll()
		return nil, nil, nil, nil, err
	}
	s.setPid(e, proc)
	// The Sandbox has its own copies of these.
	ow.Close()
	ew.Close()
	if inR != nil {
		inR.Close()
	}
	return proc, inW, or, er, nil
}

// pipe is a pipe whose one end the stand-in keeps, read or written
// through the runtime's poller, and whose other end only goes to a
// Sandbox (os.Pipe would register both with the poller): keepRead says
// which end is kept.
func pipe(keepRead bool) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("creating a pipe: %w", err)
	}
	kept := p[1]
	if keepRead {
		kept = p[0]
	}
	if err := unix.SetNonblock(kept, true); err != nil { // os.NewFile makes it pollable
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, fmt.Errorf("creating a pipe: %w", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// streamBufs are the buffers an attached exec's output is read through:
// a run execs thousands of times, and most execs write little or nothing.
var streamBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// execDetached starts the process with nothing attached: its stdio is
// /dev/null, so that a daemon that writes to stdout neither blocks nor dies
// of SIGPIPE once nobody reads.
func (s *Server) execDetached(w http.ResponseWriter, e *execRec, sb *sandbox.Sandbox) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		s.execFailed(e, 126)
		engineapi.Fail(w, fmt.Errorf("opening %s for a detached exec: %w", os.DevNull, err))
		return
	}
	proc, err := sb.Exec(e.process(), nil, null, null)
	null.Close()
	if err != nil {
		s.execFailed(e, execStatus(err))
		engineapi.Fail(w, fmt.Errorf("starting exec %s: %w", e.ID[:12], err))
		return
	}
	s.setPid(e, proc)
	go s.finishExec(e, proc, nil)
	engineapi.WriteJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) setPid(e *execRec, proc *sandbox.Proc) {
	s.mu.Lock()
	e.pid = proc.Pid
	s.mu.Unlock()
}

func execStatus(err error) int {
	var ee *sandbox.ExecError
	if errors.As(err, &ee) {
		return ee.Status
	}
	return 126
}

func (s *Server) execFailed(e *execRec, status int) {
	s.mu.Lock()
	e.running, e.exitCode = false, &status
	s.mu.Unlock()
}

// finishExec waits for the process (and its output, when wg is given) and
// records its exit.
func (s *Server) finishExec(e *execRec, proc *sandbox.Proc, wg *sync.WaitGroup) {
	status, nanos, _ := proc.Wait()
	if wg != nil {
		wg.Wait()
	}
	s.mu.Lock()
	e.running, e.exitCode, e.commandNanos = false, &status, nanos
	s.mu.Unlock()
}
