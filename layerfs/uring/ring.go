//go:build linux

package uring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI this package uses (include/uapi/linux/io_uring.h). Only
// what a FUSE queue needs: SQE128 rings, URING_CMD and POLL_ADD.
const (
	setupCQSize = 1 << 3  // IORING_SETUP_CQSIZE
	setupSQE128 = 1 << 10 // IORING_SETUP_SQE128

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	registerFiles = 2      // IORING_REGISTER_FILES
	sqeFixedFile  = 1 << 0 // IOSQE_FIXED_FILE: fd is an index of registered files

	opPollAdd  = 6  // IORING_OP_POLL_ADD
	opURingCmd = 46 // IORING_OP_URING_CMD

	sqeSize = 128 // with IORING_SETUP_SQE128
	cqeSize = 16  // without IORING_SETUP_CQE32
)

// SQE field offsets (struct io_uring_sqe).
const (
	sqeOpcode   = 0
	sqeFlags    = 1
	sqeFd       = 4
	sqeCmdOp    = 8 // union with off
	sqeAddr     = 16
	sqeLen      = 24
	sqeOpFlags  = 28 // poll32_events, uring_cmd_flags
	sqeUserData = 32
	sqeCmd      = 48 // the 80-byte command area of an SQE128
)

type sqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	Resv2                                                           uint64
}

type cqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	Resv2                                                           uint64
}

type ringParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  sqringOffsets
	CQOff                                                                  cqringOffsets
}

// ring is one io_uring instance with 128-byte SQEs. It is not safe for
// concurrent use: one goroutine, locked to its thread, owns it.
type ring struct {
	fd int

	sqMem, cqMem, sqeMem []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	sqArray        unsafe.Pointer

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer

	tail uint32 // our SQ tail, published by submit
}

// newRing sets up a ring of at least entries SQEs and twice that many CQEs.
func newRing(entries uint32) (*ring, error) {
	p := ringParams{Flags: setupSQE128 | setupCQSize, CQEntries: 2 * entries}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	sqSize := int(p.SQOff.Array) + int(p.SQEntries)*4
	cqSize := int(p.CQOff.Cqes) + int(p.CQEntries)*cqeSize
	var err error
	if p.Features&featSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
		if r.sqMem, err = mmap(r.fd, offSQRing, sqSize); err != nil {
			r.close()
			return nil, err
		}
		r.cqMem = r.sqMem
	} else {
		if r.sqMem, err = mmap(r.fd, offSQRing, sqSize); err != nil {
			r.close()
			return nil, err
		}
		if r.cqMem, err = mmap(r.fd, offCQRing, cqSize); err != nil {
			r.close()
			return nil, err
		}
	}
	if r.sqeMem, err = mmap(r.fd, offSQEs, int(p.SQEntries)*sqeSize); err != nil {
		r.close()
		return nil, err
	}
	sq, cq := unsafe.Pointer(&r.sqMem[0]), unsafe.Pointer(&r.cqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.SQOff.Head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.SQOff.Tail))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.SQOff.RingMask))
	r.sqEntries = *(*uint32)(unsafe.Add(sq, p.SQOff.RingEntries))
	r.sqArray = unsafe.Add(sq, p.SQOff.Array)
	r.cqHead = (*uint32)(unsafe.Add(cq, p.CQOff.Head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.CQOff.Tail))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.CQOff.RingMask))
	r.cqes = unsafe.Add(cq, p.CQOff.Cqes)
	r.tail = atomic.LoadUint32(r.sqTail)
	return r, nil
}

func mmap(fd int, off int64, size int) ([]byte, error) {
	b, err := unix.Mmap(fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap of io_uring region %#x: %w", off, err)
	}
	return b, nil
}

// registerFile makes fd the ring's fixed file 0, so that each SQE on it
// skips looking the descriptor up.
func (r *ring) registerFile(fd int) error {
	fds := [1]int32{int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerFiles, uintptr(unsafe.Pointer(&fds[0])), 1, 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register of the /dev/fuse descriptor: %w", errno)
	}
	return nil
}

// close unmaps the ring and closes its descriptor. The kernel cancels what
// is still in flight on it.
func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && &r.cqMem[0] != &r.sqMem[0] {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	unix.Close(r.fd)
	r.sqMem, r.cqMem, r.sqeMem = nil, nil, nil
}

// sqe returns a zeroed SQE to fill, queued for the next submit, or nil when
// the submission queue is full.
func (r *ring) sqe() []byte {
	if r.tail-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		return nil
	}
	idx := r.tail & r.sqMask
	*(*uint32)(unsafe.Add(r.sqArray, 4*idx)) = idx
	r.tail++
	s := r.sqeMem[int(idx)*sqeSize : int(idx+1)*sqeSize]
	clear(s)
	return s
}

// enter submits every queued SQE and, when wait is set, waits for at least
// one completion. EINTR (the Go runtime's preemption signal) is retried.
func (r *ring) enter(wait bool) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	for {
		toSubmit := r.tail - atomic.LoadUint32(r.sqHead)
		var minComplete, flags uintptr
		if wait {
			if r.ready() {
				wait = false
			} else {
				minComplete, flags = 1, enterGetEvents
			}
		}
		if toSubmit == 0 && !wait {
			return nil
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), minComplete, flags, 0, 0)
		switch errno {
		case 0:
			if r.tail == atomic.LoadUint32(r.sqHead) {
				return nil
			}
		case unix.EINTR, unix.EAGAIN, unix.EBUSY:
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// ready reports whether a completion is waiting.
func (r *ring) ready() bool {
	return atomic.LoadUint32(r.cqHead) != atomic.LoadUint32(r.cqTail)
}

// cqe is one completion.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// reap calls f on every waiting completion, then frees their slots.
func (r *ring) reap(f func(cqe)) {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		p := unsafe.Add(r.cqes, int(head&r.cqMask)*cqeSize)
		c := cqe{
			userData: *(*uint64)(p),
			res:      *(*int32)(unsafe.Add(p, 8)),
			flags:    *(*uint32)(unsafe.Add(p, 12)),
		}
		atomic.StoreUint32(r.cqHead, head+1)
		f(c)
	}
}
