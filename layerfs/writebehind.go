//go:build linux

package layerfs

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Write-behind. A write into a lazily copied-up file (lazycopy.go) costs
// its writer two copies where a native overwrite costs one: the kernel's
// into the request, and the daemon's into the data file, which on a fresh
// data file also allocates its pages. So a large write inside the base
// size, where startLazy reserved the blocks (it cannot fail for want of
// space), is answered as soon as its bytes are copied aside, and a
// Workspace's writer goroutine, on another CPU, writes it into the data
// file while the writer makes its next block. Writes done behind go in
// the order they were answered, at most wbDepth of them (wbDepth MiB) at a
// time: a writer that gets further ahead waits for a buffer.
//
// Nothing can tell: Workspace.mu's Lock waits until every write done
// behind is in its data file, and everything that could look at a data
// file takes it first (GETATTR, an open, a Commit, another write of the
// file that is not done behind, the release, an unmount). The only readers
// that do not ask the daemon are passthrough handles, and a lazily
// copied-up file has none: any other open of it finishes the copy-up
// first. A write done behind that fails is the next fsync's error, as a
// write-back error is (never a later write's: see lazyHandle.err).

// wbDepth is how many writes may wait behind.
const wbDepth = 4

// writeBehindMin is the smallest write done behind: below it, copying it
// aside costs about what writing it does.
const writeBehindMin = 64 << 10

// writeBehindOff turns write-behind off, for measuring what it buys.
var writeBehindOff bool

// writeBehindFault, set by tests, is the error of the write behind at off.
var writeBehindFault atomic.Pointer[func(off int64) error]

// wsMutex is Workspace.mu: a mutex whose Lock also waits for the writes
// done behind.
type wsMutex struct {
	sync.Mutex
	wb *writeBehind
}

// Lock locks, then waits until no write is behind.
func (m *wsMutex) Lock() {
	m.Mutex.Lock()
	m.wb.drain()
}

// lockAhead locks without waiting for the writes behind: for a write that
// may itself be done behind, which the writer keeps in order.
func (m *wsMutex) lockAhead() { m.Mutex.Lock() }

// writeBehind is a Workspace's writer of writes done behind.
type writeBehind struct {
	pending atomic.Int64 // writes queued or being written

	mu   sync.Mutex // guards the lazyHandles' err, and is cond's
	cond *sync.Cond // broadcast when pending drops to zero

	jobs   chan wbJob
	free   chan *[]byte
	allocs int // buffers made; guarded by Workspace.mu
	done   chan struct{}
}

type wbJob struct {
	h   *lazyHandle
	bp  *[]byte
	n   int
	off int64
}

func newWriteBehind() *writeBehind {
	wb := &writeBehind{jobs: make(chan wbJob, wbDepth), free: make(chan *[]byte, wbDepth), done: make(chan struct{})}
	wb.cond = sync.NewCond(&wb.mu)
	go wb.run()
	return wb
}

// run writes the jobs in order until stop.
func (wb *writeBehind) run() {
	defer close(wb.done)
	for j := range wb.jobs {
		n, err := unix.Pwrite(int(j.h.f.Fd()), (*j.bp)[:j.n], j.off)
		if fault := writeBehindFault.Load(); fault != nil {
			err = (*fault)(j.off)
		}
		if err == nil && n < j.n {
			err = io.ErrShortWrite
		}
		wb.free <- j.bp
		wb.mu.Lock()
		if err != nil && j.h.err == nil {
			j.h.err = fmt.Errorf("writing %d bytes at %d behind, into the data file of inode %d: %w", j.n, j.off, j.h.in.ino, err)
		}
		if wb.pending.Add(-1) == 0 {
			wb.cond.Broadcast()
		}
		wb.mu.Unlock()
	}
}

// drain waits until no write is behind.
func (wb *writeBehind) drain() {
	if wb == nil || wb.pending.Load() == 0 {
		return
	}
	wb.mu.Lock()
	for wb.pending.Load() > 0 {
		wb.cond.Wait()
	}
	wb.mu.Unlock()
}

// stop ends the writer once every write behind is in. No write may come
// after it.
func (wb *writeBehind) stop() {
	close(wb.jobs)
	<-wb.done
	for {
		select {
		case bp := <-wb.free:
			hashBufPool.Put(bp)
		default:
			return
		}
	}
}

// write copies data aside and queues it to be written at off through h.
// Workspace.mu is held (by lockAhead).
func (wb *writeBehind) write(h *lazyHandle, data []byte, off int64) {
	var bp *[]byte
	select {
	case bp = <-wb.free:
	default:
		if wb.allocs < wbDepth {
			wb.allocs++
			bp = hashBufPool.Get().(*[]byte)
		} else {
			bp = <-wb.free // the writer needs no lock to give one back
		}
	}
	n := copy(*bp, data)
	wb.pending.Add(1)
	wb.jobs <- wbJob{h: h, bp: bp, n: n, off: off}
}

// takeErr returns, once, h's write done behind that failed.
func (wb *writeBehind) takeErr(h *lazyHandle) error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	err := h.err
	h.err = nil
	return err
}
