//go:build linux

package uring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Transport names how a mount's requests travel between kernel and daemon.
type Transport string

const (
	// Auto is io_uring where the kernel grants it, /dev/fuse otherwise.
	Auto Transport = "auto"
	// URing is FUSE over io_uring, or an error.
	URing Transport = "uring"
	// Dev is reads and writes of /dev/fuse, go-fuse's own loop.
	Dev Transport = "dev"
)

// ParseTransport parses "auto", "uring" or "dev".
func ParseTransport(s string) (Transport, error) {
	switch t := Transport(s); t {
	case Auto, URing, Dev:
		return t, nil
	}
	return "", fmt.Errorf("unknown FUSE transport %q (want auto, uring or dev)", s)
}

// DefaultQueueDepth is the entries per queue when Options.QueueDepth is
// zero: libfuse's default.
const DefaultQueueDepth = 8

// Options are the transport's options; the file system's are the
// fuse.MountOptions given to Mount beside them.
type Options struct {
	// Transport is Auto when empty.
	Transport Transport
	// QueueDepth is the number of requests each CPU's queue can hold at
	// once; DefaultQueueDepth when zero. Each entry holds a buffer of the
	// mount's largest request (MaxWrite, at least 128 KiB).
	QueueDepth int
	// NoPin leaves the queue threads free to run on any CPU.
	NoPin bool
}

// Server is a mounted file system and the transport serving it.
type Server struct {
	fuse      *fuse.Server
	dir       string
	transport Transport
	reason    error
	ownMount  bool

	dev *devFS
	ps  *fuse.ProtocolServer

	ringFd int // our dup of the /dev/fuse descriptor, for the rings
	mu     sync.Mutex
	queues []*queue

	serveOnce sync.Once
	done      chan struct{}
}

// serve starts a /dev/fuse loop, once: go-fuse's (s.fuse.Serve) or ours
// (a devLoop). When it ends (the mount is gone), the queues are stopped
// and Wait returns.
func (s *Server) serve(loop func()) {
	s.serveOnce.Do(func() {
		go func() {
			loop()
			s.stopQueues()
			if s.ringFd >= 0 {
				unix.Close(s.ringFd)
			}
			close(s.done)
		}()
	})
}

// Mount mounts raw at dir with the options mopts and serves it over the
// transport opts asks for. With Auto, a kernel that does not grant io_uring
// gets /dev/fuse and Reason says why; with URing it is an error wrapping
// ErrNotNegotiated and nothing stays mounted. The caller must Unmount.
func Mount(dir string, raw fuse.RawFileSystem, mopts *fuse.MountOptions, opts Options) (*Server, error) {
	if opts.Transport == "" {
		opts.Transport = Auto
	}
	if _, err := ParseTransport(string(opts.Transport)); err != nil {
		return nil, err
	}
	if opts.QueueDepth <= 0 {
		opts.QueueDepth = DefaultQueueDepth
	}
	if mopts == nil {
		mopts = &fuse.MountOptions{}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mounting at %q: %w", dir, err)
	}
	s := &Server{dir: dir, dev: &devFS{RawFileSystem: raw}, ringFd: -1, done: make(chan struct{})}
	if opts.Transport == Dev {
		err = s.mountDev(mopts)
	} else if why := Available(); why == nil {
		err = s.mountURing(raw, mopts, opts)
	} else if opts.Transport == URing {
		return nil, fmt.Errorf("mounting %q over io_uring: %w", dir, why)
	} else {
		s.reason = why
		err = s.mountDev(mopts)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// mountDev is go-fuse's mount and loop, untouched.
func (s *Server) mountDev(mopts *fuse.MountOptions) error {
	s.transport = Dev
	srv, err := fuse.NewServer(s.dev, s.dir, mopts)
	if err != nil {
		return fmt.Errorf("mounting %q: %w", s.dir, err)
	}
	s.fuse = srv
	s.serve(srv.Serve)
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return fmt.Errorf("mounting %q: %w", s.dir, err)
	}
	return nil
}

func (s *Server) mountURing(raw fuse.RawFileSystem, mopts *fuse.MountOptions, opts Options) (err error) {
	mo := *mopts
	mo.ExtraCapabilities |= capOverIOURing
	mo.DisabledCapabilities &^= capOverIOURing
	if mo.MaxWrite <= 0 {
		mo.MaxWrite = 128 << 10 // go-fuse's default
	}
	if mo.Name == "" {
		mo.Name = strings.ReplaceAll(raw.String()[:min(len(raw.String()), 20)], ",", ";")
	}
	fd, err := mountFD(s.dir, &mo)
	if err != nil {
		return fmt.Errorf("mounting %q: %w", s.dir, err)
	}
	s.ownMount = true
	defer func() {
		if err != nil {
			unix.Unmount(s.dir, unix.MNT_DETACH)
		}
	}()
	// go-fuse takes the descriptor through the /dev/fd/N mount point: it
	// then neither mounts nor knows the mount point, and Unmount is ours.
	mo.DirectMount, mo.DirectMountStrict = false, false
	srv, err := fuse.NewServer(s.dev, "/dev/fd/"+strconv.Itoa(fd), &mo)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("mounting %q: %w", s.dir, err)
	}
	s.fuse = srv
	ks := srv.KernelSettings()
	if ks.Flags64()&capOverIOURing == 0 {
		// The kernel did not offer it, so it did not take it either:
		// the connection is an ordinary /dev/fuse one.
		s.transport = Dev
		s.reason = fmt.Errorf("%w: the kernel's INIT did not offer it (protocol %d.%d)", ErrNotNegotiated, ks.Major, ks.Minor)
		s.serve(srv.Serve)
		if opts.Transport == URing {
			s.Unmount()
			return fmt.Errorf("mounting %q over io_uring: %w", s.dir, s.reason)
		}
		pollHack(s.dir)
		return nil
	}

	// From here the kernel holds every new request until all queues are
	// registered, or until a registration fails (then it falls back to
	// /dev/fuse for good).
	s.transport = URing
	if s.ringFd, err = unix.Dup(fd); err != nil {
		s.ringFd = -1
		failRegistration(fd)
		return s.fallBack(opts, fmt.Errorf("%w: dup of /dev/fuse: %v", ErrNotNegotiated, err))
	}
	unix.CloseOnExec(s.ringFd)
	s.ps = fuse.NewProtocolServer(raw, &mo)
	if err := replayInit(s.ps, ks); err != nil {
		failRegistration(s.ringFd)
		return s.fallBack(opts, err)
	}
	// From here /dev/fuse is read by a devLoop, never by go-fuse's
	// Server: see devLoop. The descriptor stays the Server's (an
	// os.File, closed when the Server is collected): closing it here too
	// could close a later descriptor that reused its number.
	s.serve(newDevLoop(s, fd, payloadSize(&mo)).run)
	if err := s.startQueues(&mo, opts); err != nil {
		return s.fallBack(opts, err)
	}
	pollHack(s.dir)
	return nil
}

// pollHack makes the kernel send one FUSE_POLL, which go-fuse answers
// ENOSYS, so that the kernel never sends another: go-fuse's WaitMount does
// this, but not for a /dev/fd/N mount point. Without it, a goroutine of
// this process that opens a file on the mount sends FUSE_POLL from the
// runtime's netpoller (epoll_ctl) while holding its P; a stop-the-world
// then waits for that P, and the queue thread that would answer waits for
// the world: the process hangs, and cannot even die.
func pollHack(dir string) {
	fd, err := unix.Open(filepath.Join(dir, ".go-fuse-epoll-hack"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
	unix.Close(fd)
}

// fallBack leaves the mount on /dev/fuse after io_uring failed to start
// (Auto), or unmounts it (URing).
func (s *Server) fallBack(opts Options, why error) error {
	s.transport = Dev
	s.reason = why
	s.serve(s.fuse.Serve) // unless a devLoop runs already
	if opts.Transport == URing {
		s.Unmount()
		return fmt.Errorf("mounting %q over io_uring: %w", s.dir, why)
	}
	pollHack(s.dir)
	return nil
}

// failRegistration sends, on the /dev/fuse descriptor fd, a registration
// the kernel must refuse, which turns io_uring off on the connection, so
// requests held for the rings go to /dev/fuse instead of waiting forever.
func failRegistration(fd int) {
	r, err := newRing(2)
	if err != nil {
		return
	}
	defer r.close()
	sqe := r.sqe()
	sqe[sqeOpcode] = opURingCmd
	binary.LittleEndian.PutUint32(sqe[sqeFd:], uint32(fd))
	binary.LittleEndian.PutUint32(sqe[sqeCmdOp:], cmdRegister)
	binary.LittleEndian.PutUint16(sqe[sqeCmd+cmdReqQid:], 0xffff) // no such queue
	r.enter(true)
}

// replayInit shows the kernel's INIT to the ProtocolServer, which did not
// see it (the Server answered it on /dev/fuse), so that it parses requests
// with the negotiated protocol.
func replayInit(ps *fuse.ProtocolServer, ks *fuse.InitIn) error {
	// go-fuse's InitIn starts with the request header; the body follows.
	body := unsafe.Slice((*byte)(unsafe.Pointer(ks)), unsafe.Sizeof(*ks))[inHeaderSize:]
	hdr := make([]byte, inHeaderSize)
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(hdr)+len(body)))
	binary.LittleEndian.PutUint32(hdr[4:], opInit)
	binary.LittleEndian.PutUint64(hdr[8:], 1)
	out := make([]byte, 4096)
	n, st := ps.HandleRequest([][]byte{hdr, body}, [][]byte{out})
	if !st.Ok() || n < outHeaderSize || binary.LittleEndian.Uint32(out[4:]) != 0 {
		return fmt.Errorf("%w: replaying INIT to go-fuse's ProtocolServer: %v", ErrNotNegotiated, st)
	}
	return nil
}

// mountFD opens /dev/fuse and mounts it at dir as go-fuse's DirectMount
// does, and returns the descriptor.
func mountFD(dir string, mo *fuse.MountOptions) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return -1, err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if mo.DirectMountFlags != 0 {
		flags = mo.DirectMountFlags
	}
	data := []string{
		"fd=" + strconv.Itoa(fd),
		fmt.Sprintf("rootmode=%o", st.Mode&unix.S_IFMT),
		"user_id=" + strconv.Itoa(os.Geteuid()),
		"group_id=" + strconv.Itoa(os.Getegid()),
		"max_read=" + strconv.Itoa(mo.MaxWrite),
	}
	for _, o := range mo.Options {
		switch o {
		case "nodev":
			flags |= unix.MS_NODEV
		case "dev":
			flags &^= unix.MS_NODEV
		case "nosuid":
			flags |= unix.MS_NOSUID
		case "suid":
			flags &^= unix.MS_NOSUID
		case "noexec":
			flags |= unix.MS_NOEXEC
		case "exec":
			flags &^= unix.MS_NOEXEC
		default:
			data = append(data, o)
		}
	}
	if mo.AllowOther {
		data = append(data, "allow_other")
	}
	source := mo.FsName
	if source == "" {
		source = mo.Name
	}
	if err := unix.Mount(source, dir, "fuse."+mo.Name, flags, strings.Join(data, ",")); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("mount(2): %w", err)
	}
	return fd, nil
}

// Fuse is go-fuse's Server of the mount, for KernelSettings and
// notifications. Do not call its Unmount; call the Server's.
func (s *Server) Fuse() *fuse.Server { return s.fuse }

// Transport is the transport serving the mount: URing or Dev.
func (s *Server) Transport() Transport { return s.transport }

// Reason says why a mount asked to use io_uring (Auto) is served over
// /dev/fuse; nil otherwise. It wraps ErrNotNegotiated.
func (s *Server) Reason() error { return s.reason }

// Dir is the mount point.
func (s *Server) Dir() string { return s.dir }

// Unmount unmounts the file system and waits for the transport to stop.
// It retries while the mount is busy, for about a second.
func (s *Server) Unmount() error {
	if !s.ownMount {
		err := s.fuse.Unmount()
		if err == nil {
			s.Wait()
		}
		return err
	}
	var err error
	delay := time.Millisecond
	for try := 0; try < 8; try++ {
		if err = unix.Unmount(s.dir, 0); err == nil || errors.Is(err, unix.EINVAL) {
			// EINVAL: not mounted (any more).
			s.Wait()
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(delay)
		delay *= 2
	}
	return fmt.Errorf("unmounting %q: %w", s.dir, err)
}

// Wait waits until the mount is gone (unmounted, or its connection
// aborted) and every queue has stopped.
func (s *Server) Wait() { <-s.done }

// QueueStats are one io_uring queue's figures.
type QueueStats struct {
	// CPU is the queue's CPU (and its index: the kernel picks the queue
	// by the CPU a request is made on).
	CPU int `json:"cpu"`
	// Pinned is set when the queue's thread was pinned to the CPU.
	Pinned bool `json:"pinned"`
	// Requests is the number of requests served from this queue.
	Requests int64 `json:"requests"`
}

// Stats are the transport's figures.
type Stats struct {
	Transport Transport `json:"transport"`
	// Reason says why io_uring is not used, when it was asked for.
	Reason string       `json:"reason,omitempty"`
	Queues []QueueStats `json:"queues,omitempty"`
	// RingRequests sums Queues.
	RingRequests int64 `json:"ringRequests"`
	// DevRequests are the requests that reached the file system through
	// /dev/fuse, FORGETs aside (they always come that way).
	DevRequests int64 `json:"devRequests"`
	Forgets     int64 `json:"forgets"`
}

// Stats returns the transport's figures so far.
func (s *Server) Stats() Stats {
	st := Stats{Transport: s.transport, DevRequests: s.dev.requests.Load(), Forgets: s.dev.forgets.Load()}
	if s.reason != nil {
		st.Reason = s.reason.Error()
	}
	s.mu.Lock()
	queues := s.queues
	s.mu.Unlock()
	for _, q := range queues {
		n := q.requests.Load()
		st.Queues = append(st.Queues, QueueStats{CPU: q.qid, Pinned: q.pinned.Load(), Requests: n})
		st.RingRequests += n
	}
	return st
}

// possibleCPUs is the kernel's num_possible_cpus(): the number of queues
// it wants.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	return countCPUs(string(b))
}

// countCPUs counts the CPUs of a kernel CPU list such as "0-3,8".
func countCPUs(list string) (int, error) {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("parsing CPU list %q: %w", list, err)
		}
		c := a
		if isRange {
			if c, err = strconv.Atoi(hi); err != nil || c < a {
				return 0, fmt.Errorf("parsing CPU list %q: bad range %q", list, part)
			}
		}
		n += c - a + 1
	}
	return n, nil
}

// payloadSize is the size of a request's payload buffer: the kernel wants
// room for the largest request or reply (the ring's max_payload_sz).
func payloadSize(mo *fuse.MountOptions) int {
	page := os.Getpagesize()
	payload := max(minReadBuffer, mo.MaxWrite, defaultMaxPagesPerRq*page)
	return (payload + page - 1) / page * page
}

// startQueues registers every queue and returns once each has registered
// its entries or failed.
func (s *Server) startQueues(mo *fuse.MountOptions, opts Options) error {
	n, err := possibleCPUs()
	if err != nil {
		failRegistration(s.ringFd)
		return fmt.Errorf("%w: %v", ErrNotNegotiated, err)
	}
	payload := payloadSize(mo)
	started := make(chan error, n)
	var queues []*queue
	for qid := 0; qid < n; qid++ {
		evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			for _, q := range queues {
				unix.Close(q.evfd)
			}
			failRegistration(s.ringFd)
			return fmt.Errorf("%w: eventfd: %v", ErrNotNegotiated, err)
		}
		queues = append(queues, &queue{s: s, qid: qid, depth: opts.QueueDepth, payloadSize: payload,
			pin: !opts.NoPin, evfd: evfd, exited: make(chan struct{})})
	}
	s.mu.Lock()
	s.queues = queues
	s.mu.Unlock()
	for _, q := range queues {
		go q.run(started)
	}
	var errs []error
	for range n {
		if err := <-started; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		failRegistration(s.ringFd)
		s.stopQueues()
		return fmt.Errorf("%w: starting the io_uring queues: %w", ErrNotNegotiated, errors.Join(errs...))
	}
	return nil
}

// stopQueues tells every queue to stop and waits for them.
func (s *Server) stopQueues() {
	s.mu.Lock()
	queues := s.queues
	s.mu.Unlock()
	for _, q := range queues {
		q.stop()
	}
	for _, q := range queues {
		q.close()
	}
}

// errnoOf turns a negative CQE result into an error.
func errnoOf(res int32) error { return syscall.Errno(-res) }
