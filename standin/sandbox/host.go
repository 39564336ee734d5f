//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sandbox is a running Sandbox, seen from the host.
type Sandbox struct {
	ID  string
	Pid int // the init's PID on the host
	// MainPid is the main process's PID inside the Sandbox.
	MainPid int

	cmd *exec.Cmd
	ctl *net.UnixConn
	wmu sync.Mutex
	// execs are the sockets execs go to, by grant: [0] unprivileged,
	// [1] privileged (the init's fdExecUnprivileged, fdExecPrivileged).
	execs [2]*net.UnixConn
	done  chan struct{}

	mu       sync.Mutex
	status   int
	reported bool
}

// ExitStatus is how a process ended: its exit code, or 128 plus the signal
// that killed it, as a shell reports it.
type ExitStatus = int

func socketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a socket pair: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "sandbox-socket")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("wrapping a socket pair: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "sandbox-socket-peer"), nil
}

// Start builds the Sandbox's namespaces and root and starts its main
// process, whose stdout and stderr go to the given files (write ends the
// caller keeps reading). It returns once the main process has started, or
// with the init's error. The init is this very binary, re-executed: the
// caller's main must call IsInit and InitMain.
func Start(spec *Spec, stdout, stderr *os.File) (*Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the spec pipe: %w", err)
	}
	defer specR.Close()
	ctl, peer, err := socketPair()
	if err != nil {
		specW.Close()
		return nil, err
	}
	var execs [2]*net.UnixConn
	var execPeers [2]*os.File
	closeHost := func() {
		specW.Close()
		ctl.Close()
		for _, c := range execs {
			if c != nil {
				c.Close()
			}
		}
	}
	closePeers := func() {
		peer.Close()
		for _, f := range execPeers {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := range execs {
		if execs[i], execPeers[i], err = socketPair(); err != nil {
			closePeers()
			closeHost()
			return nil, err
		}
	}
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   []string{initArg0, spec.RootfsDir}, // the path names the stand-in that owns it, for audits
		Env:    []string{},
		Stderr: os.Stderr, // only a crash of the init itself writes here
		// At fdSpec, fdControl, fdStdout, fdStderr, fdExecUnprivileged, fdExecPrivileged.
		ExtraFiles: []*os.File{specR, peer, stdout, stderr, execPeers[0], execPeers[1]},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
				unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP,
			// Pdeathsig is tied to the thread that forked, which Go may
			// retire; the init watches its control socket instead.
		},
	}
	err = cmd.Start()
	closePeers()
	if err != nil {
		closeHost()
		return nil, fmt.Errorf("starting the sandbox init for %s: %w", spec.ID, err)
	}
	go func() {
		specW.Write(b)
		specW.Close()
	}()
	s := &Sandbox{ID: spec.ID, Pid: cmd.Process.Pid, cmd: cmd, ctl: ctl, execs: execs, done: make(chan struct{})}
	ready := make(chan error, 1)
	go s.watch(ready)
	if err := <-ready; err != nil {
		<-s.done
		return nil, fmt.Errorf("starting sandbox %s: %w", spec.ID, err)
	}
	return s, nil
}

// watch reads the init's reports until it exits, then reaps it.
func (s *Sandbox) watch(ready chan<- error) {
	buf := make([]byte, 64<<10)
	sentReady := false
	for {
		n, err := s.ctl.Read(buf)
		if err != nil || n == 0 {
			break
		}
		var m message
		if json.Unmarshal(buf[:n], &m) != nil {
			continue
		}
		switch m.Kind {
		case kindReady:
			s.MainPid = m.Pid
			sentReady = true
			ready <- nil
		case kindError:
			if !sentReady {
				sentReady = true
				ready <- errors.New(m.Error)
			}
		case kindExit:
			s.mu.Lock()
			s.status, s.reported = m.Status, true
			s.mu.Unlock()
		}
	}
	err := s.cmd.Wait()
	s.ctl.Close()
	for _, c := range s.execs {
		c.Close()
	}
	if !sentReady {
		ready <- fmt.Errorf("the sandbox init exited during setup: %v", err)
	}
	s.mu.Lock()
	if !s.reported {
		// Killed before its main process ended: report it as the shell
		// would, 128 plus the signal.
		s.status = 137
		if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			s.status = 128 + int(ws.Signal())
		}
	}
	s.mu.Unlock()
	close(s.done)
}

// Done is closed once the Sandbox is gone: its init and so every process
// in it have exited, and with them its namespaces and mounts.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Status is the main process's exit status; valid once Done is closed.
func (s *Sandbox) Status() ExitStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Sandbox) write(m message, fds []int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _, err = s.ctl.WriteMsgUnix(b, oob, nil)
	return err
}

// sendExec sends an exec, with its descriptors, to the socket of the
// workers that may start it: those with the container's grant for a
// privileged one, the restricted ones for any other.
func (s *Sandbox) sendExec(p *Process, stdin bool, fds []int) error {
	b, err := json.Marshal(message{Kind: kindExec, Process: p, Stdin: stdin})
	if err != nil {
		return err
	}
	c := s.execs[0]
	if p.Privileged {
		c = s.execs[1]
	}
	_, _, err = c.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
	return err
}

// Signal sends sig to the main process.
func (s *Sandbox) Signal(sig syscall.Signal) error {
	if err := s.write(message{Kind: kindSignal, Signal: int(sig)}, nil); err != nil {
		return fmt.Errorf("signalling sandbox %s: %w", s.ID, err)
	}
	return nil
}

// Kill ends the Sandbox at once: SIGKILL to its init, which takes every
// process in its PID namespace with it. It does not wait; see Done.
func (s *Sandbox) Kill() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing sandbox %s: %w", s.ID, err)
	}
	return nil
}

// Proc is a process started with Exec.
type Proc struct {
	Pid  int      // inside the Sandbox
	conn *os.File // the exec's reply socket
}

// ExecError is an exec that did not start; Status is what a shell would
// report (127 not found, 126 otherwise).
type ExecError struct {
	Status int
	Msg    string
}

func (e *ExecError) Error() string { return e.Msg }

// Exec starts p in the Sandbox with the given stdio (stdin may be nil for
// /dev/null). The files are sent to the init; the caller may close its
// copies once Exec returns.
func (s *Sandbox) Exec(p *Process, stdin, stdout, stderr *os.File) (*Proc, error) {
	conn, peer, err := replyPair()
	if err != nil {
		return nil, err
	}
	fds := []int{peer}
	if stdin != nil {
		fds = append(fds, int(stdin.Fd()))
	}
	fds = append(fds, int(stdout.Fd()), int(stderr.Fd()))
	err = s.sendExec(p, stdin != nil, fds)
	unix.Close(peer)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sending exec to sandbox %s: %w", s.ID, err)
	}
	m, err := readMessage(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("exec in sandbox %s: %w", s.ID, err)
	}
	if m.Kind == kindError {
		conn.Close()
		return nil, &ExecError{Status: m.Status, Msg: m.Error}
	}
	return &Proc{Pid: m.Pid, conn: conn}, nil
}

// replyPair is an exec's reply socket: the host's end, read through the
// runtime's poller, and the end the init answers on.
func replyPair() (*os.File, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("creating a socket pair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, -1, fmt.Errorf("creating a socket pair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "exec-reply"), fds[1], nil
}

// messageBufs holds read buffers as large as any message the init sends
// (a SOCK_SEQPACKET read shorter than its message truncates it).
var messageBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

func readMessage(r io.Reader) (message, error) {
	buf := messageBufs.Get().(*[64 << 10]byte)
	defer messageBufs.Put(buf)
	n, err := r.Read(buf[:])
	if err != nil || n == 0 {
		return message{}, errors.New("the sandbox stopped")
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return message{}, fmt.Errorf("bad message from the sandbox init: %w", err)
	}
	return m, nil
}

// Wait waits for the process to end and returns its status and how long it
// ran inside the Sandbox (from its fork to its reaping). A Sandbox that
// stops first ends its processes: they report 137.
func (p *Proc) Wait() (ExitStatus, int64, error) {
	defer p.conn.Close()
	m, err := readMessage(p.conn)
	if err != nil {
		return 137, 0, nil
	}
	return m.Status, m.Nanos, nil
}
