//go:build linux

package uring

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
)

// FUSE opcodes a devLoop counts apart: they are not requests the file
// system answers, and they come on /dev/fuse whatever the transport.
const (
	opForget      = 2
	opInterrupt   = 36
	opBatchForget = 42
)

// devLoop reads /dev/fuse for a mount served over io_uring, and hands what
// it reads to the same fuse.ProtocolServer as the rings. go-fuse's Server
// cannot do it: its in-flight table is its own, so an INTERRUPT, which the
// kernel sends on /dev/fuse even for a request on a ring, would not find
// the request it is for. Once the rings are registered only FORGET,
// BATCH_FORGET and INTERRUPT come this way; after a failed registration
// (the kernel then gives up io_uring) everything does.
type devLoop struct {
	s    *Server
	fd   int
	bufs sync.Pool
}

func newDevLoop(s *Server, fd, payload int) *devLoop {
	// The kernel refuses reads into less than a WRITE of max_write with
	// its headers; replies (READ) need as much.
	size := payload + 4096
	l := &devLoop{s: s, fd: fd}
	l.bufs.New = func() any {
		b := make([]byte, size)
		return &b
	}
	return l
}

// run reads requests until the mount is gone, serving each on its own
// goroutine as go-fuse does, and then tells the file system (OnUnmount).
func (l *devLoop) run() {
	for {
		in := l.bufs.Get().(*[]byte)
		n, err := unix.Read(l.fd, *in)
		switch err {
		case nil:
			go l.serve(in, n)
			continue
		case unix.EINTR, unix.EAGAIN, unix.ENOENT:
			// ENOENT: the request was interrupted before it was read.
			l.bufs.Put(in)
			continue
		}
		// ENODEV: unmounted or aborted.
		l.bufs.Put(in)
		break
	}
	l.s.dev.RawFileSystem.OnUnmount()
}

func (l *devLoop) serve(in *[]byte, n int) {
	defer l.bufs.Put(in)
	req := (*in)[:n]
	if len(req) < inHeaderSize {
		return
	}
	switch binary.LittleEndian.Uint32(req[4:]) {
	case opForget, opBatchForget:
		l.s.dev.forgets.Add(1)
	case opInterrupt:
	default:
		l.s.dev.requests.Add(1)
	}
	out := l.bufs.Get().(*[]byte)
	defer l.bufs.Put(out)
	m, _ := l.s.ps.HandleRequest([][]byte{req}, [][]byte{*out})
	if m > 0 {
		// ENOENT is the kernel no longer waiting: an INTERRUPT's
		// EAGAIN for a request already answered, or one on a ring.
		unix.Write(l.fd, (*out)[:m])
	}
}
