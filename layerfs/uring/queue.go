//go:build linux

package uring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const (
	// slotSize holds one entry's struct fuse_uring_req_header (288
	// bytes) and, after it, the two iovecs its registration points at.
	slotSize = 512
	slotIov  = 448

	// pollTag marks the completion of the eventfd poll that wakes a queue.
	pollTag = math.MaxUint64
)

// failQueue, when not -1, is a queue that fails to start: tests use it to
// see the fallback after a partial registration.
var failQueue = -1

// entry is one ring entry: a request buffer registered with the kernel.
type entry struct {
	idx     int
	hdr     []byte // struct fuse_uring_req_header
	payload []byte
	lastCmd uint32
}

// queue serves the ring of one CPU. Everything but stop and the hand-back
// of asynchronously served entries runs on its own locked thread.
type queue struct {
	s           *Server
	qid         int
	depth       int
	payloadSize int
	pin         bool

	ring    *ring
	evfd    int
	hdrMem  []byte
	payMem  []byte
	ents    []entry
	live    int // entries the kernel still holds or has given us
	started bool
	regErr  error

	requests atomic.Int64
	pinned   atomic.Bool
	stopping atomic.Bool
	async    atomic.Int64

	mu   sync.Mutex
	done []int // entries served off the thread, to commit

	exited    chan struct{}
	closeOnce sync.Once
}

// close frees the eventfd, once the goroutine has exited.
func (q *queue) close() {
	<-q.exited
	q.closeOnce.Do(func() { unix.Close(q.evfd) })
}

// run is the queue's goroutine. It stays locked to its thread until it
// returns, and the thread then exits with it, pinning and all.
func (q *queue) run(started chan<- error) {
	runtime.LockOSThread()
	defer close(q.exited)
	if q.pin {
		var set unix.CPUSet
		set.Set(q.qid)
		// A CPU this process may not use (taskset, cgroups) leaves the
		// thread unpinned; its queue must still be registered.
		q.pinned.Store(unix.SchedSetaffinity(0, &set) == nil)
	}
	err := q.setup()
	if err == nil && q.qid == failQueue {
		err = errors.New("failing on purpose (test)")
	}
	if err == nil {
		err = q.register()
	}
	if err != nil {
		q.teardown()
		started <- fmt.Errorf("queue %d: %w", q.qid, err)
		return
	}
	started <- nil
	for q.live > 0 && !q.stopping.Load() {
		if err := q.ring.enter(true); err != nil {
			break
		}
		q.ring.reap(q.complete)
	}
	q.teardown()
}

// setup makes the ring and the entries' buffers, on the queue's thread
// (and so, when pinned, in its CPU's memory).
func (q *queue) setup() error {
	var err error
	// Room for a commit per entry and the poll, twice over.
	if q.ring, err = newRing(uint32(2 * (q.depth + 1))); err != nil {
		return err
	}
	if err := q.ring.registerFile(q.s.ringFd); err != nil {
		return err
	}
	page := unix.Getpagesize()
	hdrBytes := (q.depth*slotSize + page - 1) / page * page
	anon := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_POPULATE
	if q.hdrMem, err = unix.Mmap(-1, 0, hdrBytes, unix.PROT_READ|unix.PROT_WRITE, anon); err != nil {
		return fmt.Errorf("mmap of request headers: %w", err)
	}
	if q.payMem, err = unix.Mmap(-1, 0, q.depth*q.payloadSize, unix.PROT_READ|unix.PROT_WRITE, anon); err != nil {
		return fmt.Errorf("mmap of %d request buffers of %d bytes: %w", q.depth, q.payloadSize, err)
	}
	q.ents = make([]entry, q.depth)
	for i := range q.ents {
		slot := q.hdrMem[i*slotSize : (i+1)*slotSize]
		e := &q.ents[i]
		e.idx = i
		e.hdr = slot[:reqHeaderSize]
		e.payload = q.payMem[i*q.payloadSize : (i+1)*q.payloadSize]
		iov := slot[slotIov:]
		binary.LittleEndian.PutUint64(iov[0:], uint64(uintptr(unsafe.Pointer(&e.hdr[0]))))
		binary.LittleEndian.PutUint64(iov[8:], uint64(len(e.hdr)))
		binary.LittleEndian.PutUint64(iov[16:], uint64(uintptr(unsafe.Pointer(&e.payload[0]))))
		binary.LittleEndian.PutUint64(iov[24:], uint64(len(e.payload)))
	}
	return nil
}

// register hands every entry to the kernel, and arms the wake-up poll. A
// refused registration completes at once, so its error is known when the
// submission returns.
func (q *queue) register() error {
	for i := range q.ents {
		q.submit(&q.ents[i], cmdRegister)
		q.live++
	}
	q.armPoll()
	if err := q.ring.enter(false); err != nil {
		return err
	}
	q.ring.reap(q.complete)
	q.started = true
	return q.regErr
}

// submit queues a ring command for e: REGISTER hands the kernel e's
// buffers, COMMIT_AND_FETCH the answer in them and takes the next request.
func (q *queue) submit(e *entry, cmd uint32) {
	sqe := q.ring.sqe()
	if sqe == nil {
		// Cannot happen: the SQ has room for every entry twice.
		panic("uring: submission queue full")
	}
	e.lastCmd = cmd
	sqe[sqeOpcode] = opURingCmd
	sqe[sqeFlags] = sqeFixedFile // fd 0: the /dev/fuse descriptor

	binary.LittleEndian.PutUint32(sqe[sqeCmdOp:], cmd)
	binary.LittleEndian.PutUint64(sqe[sqeUserData:], uint64(e.idx))
	binary.LittleEndian.PutUint16(sqe[sqeCmd+cmdReqQid:], uint16(q.qid))
	if cmd == cmdRegister {
		iov := &q.hdrMem[e.idx*slotSize+slotIov]
		binary.LittleEndian.PutUint64(sqe[sqeAddr:], uint64(uintptr(unsafe.Pointer(iov))))
		binary.LittleEndian.PutUint32(sqe[sqeLen:], 2)
	} else {
		commitID := binary.LittleEndian.Uint64(e.hdr[hdrCommitID:])
		binary.LittleEndian.PutUint64(sqe[sqeCmd+cmdReqCommitID:], commitID)
	}
}

func (q *queue) armPoll() {
	sqe := q.ring.sqe()
	if sqe == nil {
		panic("uring: submission queue full")
	}
	sqe[sqeOpcode] = opPollAdd
	binary.LittleEndian.PutUint32(sqe[sqeFd:], uint32(q.evfd))
	binary.LittleEndian.PutUint32(sqe[sqeOpFlags:], unix.POLLIN)
	binary.LittleEndian.PutUint64(sqe[sqeUserData:], pollTag)
}

// complete handles one completion.
func (q *queue) complete(c cqe) {
	if c.userData == pollTag {
		var b [8]byte
		unix.Read(q.evfd, b[:])
		q.mu.Lock()
		done := q.done
		q.done = nil
		q.mu.Unlock()
		for _, i := range done {
			q.submit(&q.ents[i], cmdCommitAndFetch)
		}
		if !q.stopping.Load() {
			q.armPoll()
		}
		return
	}
	e := &q.ents[c.userData]
	switch c.res {
	case 0:
		q.requests.Add(1)
		if blocking(binary.LittleEndian.Uint32(e.hdr[hdrInOut+4:])) {
			q.async.Add(1)
			go q.serveAsync(e)
			return
		}
		q.serve(e)
		q.submit(e, cmdCommitAndFetch)
	case -int32(unix.EAGAIN), -int32(unix.EINTR):
		q.submit(e, e.lastCmd)
	default:
		// ENOTCONN: the connection is gone (unmount, abort). Anything
		// else during registration is why the queue could not start.
		q.live--
		if !q.started && q.regErr == nil {
			q.regErr = fmt.Errorf("registering ring entry %d: %w", e.idx, errnoOf(c.res))
		}
	}
}

// blocking says whether a request may wait for another request to come,
// which must then not be stuck behind it on the same queue.
func blocking(opcode uint32) bool {
	return opcode == opSetlkw || opcode == opIoctl || opcode == opPoll
}

// serveAsync serves e off the queue's thread and hands it back for commit.
func (q *queue) serveAsync(e *entry) {
	defer q.async.Add(-1)
	q.serve(e)
	q.mu.Lock()
	q.done = append(q.done, e.idx)
	q.mu.Unlock()
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	unix.Write(q.evfd, one[:])
}

// serve answers the request in e, in place: the reply's header goes where
// the request's was, its arguments into the payload buffer.
func (q *queue) serve(e *entry) {
	hdr := e.hdr
	length := int(binary.LittleEndian.Uint32(hdr[hdrInOut:]))
	opcode := binary.LittleEndian.Uint32(hdr[hdrInOut+4:])
	unique := binary.LittleEndian.Uint64(hdr[hdrInOut+8:])
	payloadSize := int(binary.LittleEndian.Uint32(hdr[hdrPayloadSize:]))
	// The kernel puts the first argument (the operation's struct, when it
	// has one) in op_in and the rest in the payload; the header's length
	// counts all of it.
	opIn := length - inHeaderSize - payloadSize
	if opIn < 0 || opIn > hdrOpInSize || payloadSize > len(e.payload) {
		q.reply(e, unique, fuse.EIO, 0)
		return
	}
	payload := e.payload[:payloadSize]
	if opcode == opIoctl {
		// Its input and output may both be long: keep the input apart
		// from the buffer the output is written to.
		payload = append([]byte(nil), payload...)
	}
	in := [3][]byte{hdr[hdrInOut : hdrInOut+inHeaderSize], hdr[hdrOpIn : hdrOpIn+opIn], payload}
	out := [2][]byte{hdr[hdrInOut : hdrInOut+outHeaderSize], e.payload}
	n, st := q.s.ps.HandleRequest(in[:], out[:])
	if n < outHeaderSize {
		// Nothing written: the request could not be parsed, or it
		// wants no reply (none such comes on a ring). The kernel waits
		// for a commit either way.
		if st.Ok() {
			st = fuse.ENOSYS
		}
		q.reply(e, unique, st, 0)
		return
	}
	binary.LittleEndian.PutUint32(hdr[hdrPayloadSize:], uint32(n-outHeaderSize))
}

// reply writes a reply of only a header.
func (q *queue) reply(e *entry, unique uint64, st fuse.Status, payload int) {
	h := e.hdr[hdrInOut:]
	binary.LittleEndian.PutUint32(h[0:], uint32(outHeaderSize+payload))
	binary.LittleEndian.PutUint32(h[4:], uint32(-int32(st)))
	binary.LittleEndian.PutUint64(h[8:], unique)
	binary.LittleEndian.PutUint32(e.hdr[hdrPayloadSize:], uint32(payload))
}

// stop makes the queue's goroutine return at its next wake-up.
func (q *queue) stop() {
	q.stopping.Store(true)
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	unix.Write(q.evfd, one[:])
}

// teardown closes the ring (the kernel cancels what is left on it) and
// frees the buffers, unless a request served off the thread still uses
// them: then they are left to the process.
func (q *queue) teardown() {
	if q.ring != nil {
		q.ring.close()
	}
	if q.async.Load() == 0 {
		if q.hdrMem != nil {
			unix.Munmap(q.hdrMem)
		}
		if q.payMem != nil {
			unix.Munmap(q.payMem)
		}
	}
}
