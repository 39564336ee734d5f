//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initArg0 is argv[0] when the stand-in's binary is started as a Sandbox's init.
const initArg0 = "standin-sandbox-init"

// Descriptors the host hands the init.
const (
	fdSpec    = 3 // a pipe carrying the JSON Spec
	fdControl = 4 // the SOCK_SEQPACKET control socket
	fdStdout  = 5 // the main process's stdout
	fdStderr  = 6 // the main process's stderr
	// The SOCK_SEQPACKET sockets execs come on, one per grant: each is
	// read by the workers of its pool themselves (see workerPool).
	fdExecUnprivileged = 7
	fdExecPrivileged   = 8
)

// IsInit reports whether this process was started as a Sandbox's init.
// Every binary that starts Sandboxes (the stand-in, and test binaries) must
// call it first thing in main (or TestMain) and then call InitMain.
func IsInit() bool { return len(os.Args) > 0 && os.Args[0] == initArg0 }

// InitMain runs the Sandbox's init and never returns.
func InitMain() {
	ctl, err := initControl()
	if err != nil {
		fmt.Fprintf(os.Stderr, "standin sandbox init: %v\n", err)
		os.Exit(2)
	}
	in := &initProc{ctl: ctl, procs: map[int]*child{}}
	if err := in.run(); err != nil {
		in.send(message{Kind: kindError, Error: err.Error()}, nil)
		os.Exit(1)
	}
	os.Exit(0)
}

func initControl() (*net.UnixConn, error) {
	// The host's dup2 cleared close-on-exec on the descriptors it passed,
	// and the host may itself have inherited descriptors without it from
	// whoever started it: nothing the Sandbox runs may inherit any of them.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, fmt.Errorf("marking inherited descriptors close-on-exec: %w", err)
	}
	f := os.NewFile(fdControl, "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("opening the control socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("control socket is a %T", c)
	}
	return uc, nil
}

type exitInfo struct {
	status int
	nanos  int64 // the process's lifetime: from just before its fork to its reaping
}

type child struct {
	started time.Time
	done    chan exitInfo
}

type initProc struct {
	ctl  *net.UnixConn
	spec Spec
	last Cap
	wmu  sync.Mutex

	mainPid int
	null    int // /dev/null, read-only: an exec's stdin when the host passes none

	unprivileged, privileged *workerPool

	mu    sync.Mutex
	procs map[int]*child
}

func (in *initProc) send(m message, c *net.UnixConn) error {
	if c == nil {
		c = in.ctl
		in.wmu.Lock()
		defer in.wmu.Unlock()
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = c.Write(b)
	return err
}

func (in *initProc) run() error {
	specFile := os.NewFile(fdSpec, "spec")
	b, err := io.ReadAll(specFile)
	specFile.Close()
	if err != nil {
		return fmt.Errorf("reading the sandbox spec: %w", err)
	}
	if err := json.Unmarshal(b, &in.spec); err != nil {
		return fmt.Errorf("parsing the sandbox spec: %w", err)
	}
	in.last = lastCap()
	for _, fd := range []int{fdExecUnprivileged, fdExecPrivileged} {
		if err := unix.SetNonblock(fd, false); err != nil { // the workers block in recvmsg
			return fmt.Errorf("opening the exec sockets: %w", err)
		}
	}
	in.unprivileged = newWorkerPool(in, fdExecUnprivileged, nil, true, true)
	in.privileged = newWorkerPool(in, fdExecPrivileged, in.spec.Caps, false, in.spec.Seccomp)
	// Nothing in the Sandbox may read this process's memory or open its
	// executable, the host's stand-in binary, through /proc/1/exe.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the init non-dumpable: %w", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("clearing supplementary groups: %w", err)
	}
	if err := setupRoot(&in.spec); err != nil {
		return err
	}
	// Signals from inside the Sandbox must not stop the init (Go would
	// exit on SIGTERM); caught signals reset to default in children.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)
	go func() {
		for range sigs {
		}
	}()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	go in.reap(chld)

	null, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/null: %w", err)
	}
	// Every exec without stdin reads this one, kept open (close-on-exec:
	// a child gets it only as its descriptor 0).
	if in.null, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("opening /dev/null: %w", err)
	}
	stdout, stderr := os.NewFile(fdStdout, "stdout"), os.NewFile(fdStderr, "stderr")
	p := in.spec.Process
	p.Privileged = true // the main process keeps what the container was granted
	pid, ch, err := in.start(&p, [3]*os.File{null, stdout, stderr})
	null.Close()
	stdout.Close()
	stderr.Close()
	if err != nil {
		return fmt.Errorf("starting %q: %w", p.Args[0], err)
	}
	in.mainPid = pid
	if err := in.send(message{Kind: kindReady, Pid: pid}, nil); err != nil {
		return fmt.Errorf("reporting ready: %w", err)
	}
	go in.serve()
	go in.unprivileged.worker()
	go in.privileged.worker()
	e := <-ch
	in.send(message{Kind: kindExit, Status: e.status}, nil)
	return nil
}

// serve handles the host's requests until the control socket closes; the
// host is gone then, and so must the Sandbox be.
func (in *initProc) serve() {
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		n, oobn, _, _, err := in.ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			os.Exit(3) // killing every process in the PID namespace
		}
		var fds []int
		if oobn > 0 {
			fds = parseRights(oob[:oobn])
		}
		var m message
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			closeAll(fds)
			continue
		}
		switch m.Kind {
		case kindSignal:
			in.mu.Lock()
			if _, running := in.procs[in.mainPid]; running {
				unix.Kill(in.mainPid, syscall.Signal(m.Signal))
			}
			in.mu.Unlock()
			closeAll(fds)
		default:
			closeAll(fds)
		}
	}
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

var errNotFound = errors.New("executable file not found in $PATH")

// start forks the main process from a restricted worker thread and
// returns its pid and where its exit arrives.
func (in *initProc) start(p *Process, stdio [3]*os.File) (int, <-chan exitInfo, error) {
	r := &spawnReq{
		p:       p,
		stdio:   [3]int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())},
		started: make(chan spawnResult, 1),
		exited:  make(chan exitInfo, 1),
	}
	pool := in.unprivileged
	if p.Privileged {
		pool = in.privileged
	}
	go pool.once(r)
	res := <-r.started
	if res.err != nil {
		return 0, nil, res.err
	}
	return res.pid, r.exited, nil
}

// spawnReq asks a worker thread to fork and exec a process: the main
// process (stdio set, answered on started) or an exec from the host (exec
// set: the descriptors it came with, answered on its reply socket by the
// worker that took it).
type spawnReq struct {
	p       *Process
	stdio   [3]int
	started chan spawnResult

	exec  []int
	stdin bool

	exited chan exitInfo
}

type spawnResult struct {
	pid int
	err error
}

// fail answers a request that could not start.
func (in *initProc) fail(r *spawnReq, err error) {
	if r.exec == nil {
		r.started <- spawnResult{err: err}
		return
	}
	status := 126
	if errors.Is(err, unix.ENOENT) || errors.Is(err, errNotFound) {
		status = 127
	}
	reply(r.exec[0], message{Kind: kindError, Error: err.Error(), Status: status})
	closeAll(r.exec)
}

// reply writes one message on an exec's reply socket. The socket is
// blocking and a message is far smaller than its buffer, so the write is
// whole or the host is gone.
func reply(fd int, m message) {
	if b, err := json.Marshal(m); err == nil {
		unix.Write(fd, b)
	}
}

// workerPool runs forks on OS threads restricted once, the same way for
// every process the pool starts (the bounding set, no_new_privs, the
// seccomp filter): a thread keeps its restrictions, so it can be reused,
// saving a thread and some fifty system calls per exec.
//
// The pool's idle workers wait for execs in recvmsg on the pool's own
// socket, which the kernel hands each message to one of them: an exec
// wakes the thread that forks it, and nothing else in the init. A worker
// also waits for its child, so the exit is seen as soon as the kernel
// reports it, and answers the host itself. A worker that takes the last
// idle place starts another, so that one always waits.
type workerPool struct {
	in         *initProc
	fd         int // the socket execs for this pool arrive on
	keep       []Cap
	noNewPrivs bool
	filter     bool

	idle atomic.Int32 // workers waiting in recvmsg, or about to
}

// maxIdleWorkers bounds the threads kept between execs.
const maxIdleWorkers = 4

func newWorkerPool(in *initProc, fd int, keep []Cap, noNewPrivs, filter bool) *workerPool {
	return &workerPool{in: in, fd: fd, keep: keep, noNewPrivs: noNewPrivs, filter: filter}
}

// restrict locks the calling goroutine to its thread for good (the
// thread's credentials change, and the runtime discards a locked thread
// when its goroutine ends) and restricts the thread as the pool's
// processes must be.
func (wp *workerPool) restrict() error {
	runtime.LockOSThread()
	return restrictThread(wp.keep, wp.in.last, wp.noNewPrivs, wp.filter)
}

// once starts r's process from a thread of its own, which waits for it and
// then goes: the main process, which lives as long as the Sandbox.
func (wp *workerPool) once(r *spawnReq) {
	if err := wp.restrict(); err != nil {
		wp.in.fail(r, err)
		return
	}
	wp.in.run1(r)
}

// worker serves execs from the pool's socket until the host closes it.
// A thread that could not be restricted never forks: it answers each exec
// it takes with why.
func (wp *workerPool) worker() {
	restrictErr := wp.restrict()
	wp.idle.Add(1)
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		r, err := wp.recv(buf, oob)
		if err != nil {
			wp.idle.Add(-1)
			return // the host is gone; serve ends the init
		}
		if wp.idle.Add(-1) == 0 {
			go wp.worker()
		}
		if r != nil {
			if restrictErr != nil {
				wp.in.fail(r, restrictErr)
			} else {
				wp.in.run1(r)
			}
		}
		if wp.idle.Add(1) > maxIdleWorkers {
			wp.idle.Add(-1)
			return
		}
	}
}

// recv waits, blocking its thread, for one exec: its message and the
// descriptors it came with (the reply socket, then stdin when m.Stdin, then
// stdout and stderr). A malformed one is dropped: nil, no error.
func (wp *workerPool) recv(buf, oob []byte) (*spawnReq, error) {
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(wp.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if n == 0 && oobn == 0 {
		return nil, io.EOF
	}
	var fds []int
	if oobn > 0 {
		fds = parseRights(oob[:oobn])
	}
	var m message
	if json.Unmarshal(buf[:n], &m) != nil || m.Kind != kindExec || m.Process == nil {
		closeAll(fds)
		return nil, nil
	}
	want := 3
	if m.Stdin {
		want = 4
	}
	if len(fds) != want {
		closeAll(fds)
		return nil, nil
	}
	return &spawnReq{p: m.Process, exec: fds, stdin: m.Stdin, exited: make(chan exitInfo, 1)}, nil
}

// run1 starts r's process from the calling (restricted) thread, answers
// whoever asked, and waits for the process.
func (in *initProc) run1(r *spawnReq) {
	stdio := r.stdio
	if r.exec != nil {
		n := len(r.exec)
		stdio = [3]int{in.null, r.exec[n-2], r.exec[n-1]}
		if r.stdin {
			stdio[0] = r.exec[1]
		}
	}
	pid, err := in.fork(r.p, stdio, r.exited)
	if err != nil {
		in.fail(r, err)
		return
	}
	if r.exec == nil {
		r.started <- spawnResult{pid: pid}
		in.wait(pid)
		return
	}
	closeAll(r.exec[1:]) // the child has its own copies
	fd := r.exec[0]
	defer unix.Close(fd)
	reply(fd, message{Kind: kindStart, Pid: pid})
	in.wait(pid)
	e := <-r.exited
	reply(fd, message{Kind: kindExit, Status: e.status, Nanos: e.nanos})
}

// fork resolves p's user and executable inside the Sandbox and forks it
// from the calling thread, its stdio the three descriptors given.
func (in *initProc) fork(p *Process, stdio [3]int, exited chan exitInfo) (int, error) {
	env := withDefaults(p.Env)
	cred, home, err := lookupUser(p.User)
	if err != nil {
		return 0, err
	}
	if home != "" && !hasEnv(env, "HOME") {
		env = append(env, "HOME="+home)
	}
	argv0, err := lookPath(p.Args[0], env, p.Cwd)
	if err != nil {
		return 0, err
	}
	cwd := p.Cwd
	if cwd == "" {
		cwd = "/"
	}
	attr := &syscall.ProcAttr{
		Dir:   cwd,
		Env:   env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys:   &syscall.SysProcAttr{Credential: cred},
	}
	in.mu.Lock() // so the reaper cannot report this pid before it is registered
	forked := time.Now()
	pid, err := syscall.ForkExec(argv0, p.Args, attr)
	if err == nil {
		in.register(pid, forked, exited)
	}
	in.mu.Unlock()
	return pid, err
}

// wait waits for pid, a child of the calling thread. The init's reaper may
// collect it first; whichever sees the exit delivers it, once.
func (in *initProc) wait(pid int) {
	var ws unix.WaitStatus
	for {
		got, err := unix.Wait4(pid, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || got != pid {
			return // the reaper has it
		}
		break
	}
	in.exitedPid(pid, ws, time.Now())
}

// register records a started process. in.mu is held from before the fork,
// so the reaper, which takes it too, cannot miss the process.
func (in *initProc) register(pid int, forked time.Time, ch chan exitInfo) {
	in.procs[pid] = &child{started: forked, done: ch}
}

// reap collects every child, ours and orphans: the init is PID 1.
func (in *initProc) reap(sig <-chan os.Signal) {
	for range sig {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			in.exitedPid(pid, ws, time.Now())
		}
	}
}

// exitedPid delivers a reaped process's exit to whoever started it;
// orphans reparented to the init are dropped.
func (in *initProc) exitedPid(pid int, ws unix.WaitStatus, now time.Time) {
	status := ws.ExitStatus()
	if ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.procs[pid]; ok {
		delete(in.procs, pid)
		c.done <- exitInfo{status: status, nanos: int64(now.Sub(c.started))}
	}
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func withDefaults(env []string) []string {
	out := append([]string(nil), env...)
	if !hasEnv(out, "PATH") {
		out = append(out, defaultPath)
	}
	return out
}

func hasEnv(env []string, k string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, k+"=") {
			return true
		}
	}
	return false
}

func getEnv(env []string, k string) string {
	v := ""
	for _, e := range env {
		if rest, ok := strings.CutPrefix(e, k+"="); ok {
			v = rest
		}
	}
	return v
}

// lookPath finds file on the process's PATH, inside the Sandbox.
func lookPath(file string, env []string, cwd string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range strings.Split(getEnv(env, "PATH"), ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if !strings.HasPrefix(p, "/") && cwd != "" {
			p = cwd + "/" + p
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: %w", file, errNotFound)
}

// lookupUser resolves a Docker user spec in the Sandbox's /etc/passwd and
// /etc/group. Root with no spec needs no credential change.
func lookupUser(spec string) (*syscall.Credential, string, error) {
	if spec == "" || spec == "root" || spec == "0" {
		return nil, "/root", nil
	}
	u, g, hasGroup := strings.Cut(spec, ":")
	uid, gid := -1, -1
	name, home := "", "/"
	if n, err := strconv.Atoi(u); err == nil {
		uid = n
	}
	for _, f := range readColon("/etc/passwd") {
		if len(f) < 7 {
			continue
		}
		if f[0] == u || (uid >= 0 && f[2] == strconv.Itoa(uid)) {
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			name, home = f[0], f[5]
			break
		}
	}
	if uid < 0 {
		return nil, "", fmt.Errorf("unable to find user %s: no matching entries in passwd file", u)
	}
	if gid < 0 {
		gid = 0
	}
	groups := readColon("/etc/group")
	if hasGroup {
		if n, err := strconv.Atoi(g); err == nil {
			gid = n
		} else {
			gid = -1
			for _, f := range groups {
				if len(f) >= 3 && f[0] == g {
					gid, _ = strconv.Atoi(f[2])
				}
			}
			if gid < 0 {
				return nil, "", fmt.Errorf("unable to find group %s: no matching entries in group file", g)
			}
		}
	}
	var supp []uint32
	if name != "" {
		for _, f := range groups {
			if len(f) < 4 {
				continue
			}
			for _, m := range strings.Split(f[3], ",") {
				if m == name {
					if n, err := strconv.Atoi(f[2]); err == nil && n != gid {
						supp = append(supp, uint32(n))
					}
				}
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: supp}, home, nil
}

func readColon(p string) [][]string {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}
