//go:build linux

package layerfs

import (
	"context"
	"fmt"
	"os"
	"sort"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Lazy copy-up. Opening a large base file write-only (no O_TRUNC) does not
// copy it up at once: the data file starts sparse at the base size, the
// writes come through the daemon (a direct-I/O handle, so the kernel sends
// each write with its exact offset and length), and the ranges nobody wrote
// are filled from the blob when the last such writer closes, or as soon as
// anything else needs the whole content (another open, a truncate, a
// Commit). A writer that overwrites the file then costs one write of the
// data instead of a copy plus a write.
//
// Passthrough could not do this: the kernel would write the data file
// without telling us where, and a partial block written into a sparse file
// cannot be told apart from zeros.

//
// Large writes inside the base size are done behind (writebehind.go).

// lazyMinSize is the smallest file copied up lazily; smaller ones are
// copied at once and keep passthrough. (A variable for tests.)
var lazyMinSize int64 = 1 << 20

type span struct{ start, end int64 }

// lazyCopy is the state of a lazy copy-up.
type lazyCopy struct {
	size    int64  // the base size: ranges below it not written come from the blob
	written []span // sorted, disjoint, merged
	writers int
	// reserved: the data file's blocks below size are allocated
	// (fallocate), so a write there cannot fail with ENOSPC.
	reserved bool
}

func (l *lazyCopy) add(start, end int64) {
	if end <= start {
		return
	}
	i := sort.Search(len(l.written), func(i int) bool { return l.written[i].end >= start })
	j := i
	for j < len(l.written) && l.written[j].start <= end {
		start = min(start, l.written[j].start)
		end = max(end, l.written[j].end)
		j++
	}
	l.written = append(l.written[:i], append([]span{{start, end}}, l.written[j:]...)...)
}

// gaps returns the ranges below size nobody wrote.
func (l *lazyCopy) gaps() []span {
	var out []span
	pos := int64(0)
	for _, s := range l.written {
		if s.start >= l.size {
			break
		}
		if s.start > pos {
			out = append(out, span{pos, s.start})
		}
		pos = max(pos, s.end)
	}
	if pos < l.size {
		out = append(out, span{pos, l.size})
	}
	return out
}

// startLazy gives a base file a sparse data file of its size, with its
// metadata, and marks it lazily copied up.
func (ws *Workspace) startLazy(in *inode) syscall.Errno {
	p := ws.upperPath(in)
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return ws.errno(err)
	}
	fail := func(err error) syscall.Errno {
		unix.Close(fd)
		os.Remove(p)
		return ws.errno(err)
	}
	// Allocate the blocks now (as unwritten extents, one cheap metadata
	// operation) rather than one page at a time under the writes; not
	// for a sparse blob, whose holes would become allocated blocks.
	reserved := !ws.blobHasHoles(in) && unix.Fallocate(fd, 0, 0, in.size) == nil
	if !reserved {
		if err := unix.Ftruncate(fd, in.size); err != nil {
			return fail(err)
		}
	}
	if err := unix.Fchown(fd, int(in.uid), int(in.gid)); err != nil {
		return fail(err)
	}
	if err := unix.Fchmod(fd, in.mode&07777); err != nil {
		return fail(err)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(in.atime), unix.NsecToTimespec(in.mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
		return fail(err)
	}
	unix.Close(fd)
	in.upper = true
	in.lazy = &lazyCopy{size: in.size, reserved: reserved}
	ws.tel.copyUps.Add(1)
	ws.tel.lazyCopyUps.Add(1)
	return 0
}

// blobHasHoles says whether the blob of in has holes.
func (ws *Workspace) blobHasHoles(in *inode) bool {
	f, err := os.Open(ws.store.blobPath(in.blob))
	if err != nil {
		return false
	}
	defer f.Close()
	return hasHoles(int(f.Fd()), in.size)
}

// finishLazy fills the ranges nobody wrote from the blob. The data file's
// mtime is what the writes made it.
func (ws *Workspace) finishLazy(in *inode) syscall.Errno {
	l := in.lazy
	if l == nil {
		return 0
	}
	in.lazy = nil
	if in.nlink == 0 && in.upperOpens == 0 {
		return 0 // nobody will ever read it
	}
	gaps := l.gaps()
	if len(gaps) == 0 {
		return 0
	}
	if err := ws.verifyFor(context.Background(), in.blob); err != nil {
		return syscall.EIO
	}
	p := ws.upperPath(in)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return ws.errno(err)
	}
	src, err := os.Open(ws.store.blobPath(in.blob))
	if err != nil {
		return ws.errno(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return ws.errno(err)
	}
	defer dst.Close()
	for _, g := range gaps {
		// Data extents only: the blob's holes stay holes (startLazy
		// left the data file sparse where the blob is).
		n, err := copySparse(context.Background(), src, dst, g.start, g.end)
		ws.tel.copyUpBytes.Add(n)
		if err != nil {
			return ws.failed(fmt.Errorf("finishing copy-up of inode %d: %w", in.ino, err))
		}
	}
	unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, st.Mtim}, 0)
	return 0
}

// lazyHandle is a write-only handle on a lazily copied-up file. It has no
// PassthroughFd: its writes come to the daemon.
type lazyHandle struct {
	f  *os.File
	ws *Workspace
	in *inode
	// err is a write done behind that failed: the handle's next fsync
	// answers it, as a write-back error is. Not a later write: the kernel
	// splits a large write(2) into several requests and, when one after
	// the first fails, returns the bytes before it, a short count that
	// callers retry (Go's WriteAt does), and the error is lost. Guarded by
	// writeBehind.mu.
	err error
}

var (
	_ fs.FileWriter    = (*lazyHandle)(nil)
	_ fs.FileReleaser  = (*lazyHandle)(nil)
	_ fs.FileFsyncer   = (*lazyHandle)(nil)
	_ fs.FileFlusher   = (*lazyHandle)(nil)
	_ fs.FileAllocater = (*lazyHandle)(nil)
)

func (h *lazyHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ws := h.ws
	ws.mu.lockAhead()
	defer ws.mu.Unlock()
	if e := ws.privsOnWrite(ctx, h.in); e != 0 {
		return 0, e
	}
	l := h.in.lazy
	if l != nil && l.reserved && !writeBehindOff && !ws.closed && len(data) >= writeBehindMin && len(data) <= 1<<20 &&
		off >= 0 && off+int64(len(data)) <= l.size {
		l.add(off, off+int64(len(data)))
		ws.tel.writesBehind.Add(1)
		ws.wb.write(h, data, off)
		return uint32(len(data)), 0
	}
	ws.wb.drain() // writes behind go first
	n, err := unix.Pwrite(int(h.f.Fd()), data, off)
	if n > 0 && l != nil {
		l.add(off, off+int64(n))
	}
	return uint32(n), ws.errno(err)
}

// writeErr answers, once, a write done behind that failed.
func (h *lazyHandle) writeErr() syscall.Errno {
	if err := h.ws.wb.takeErr(h); err != nil {
		return h.ws.failed(err)
	}
	return 0
}

func (h *lazyHandle) Flush(ctx context.Context) syscall.Errno { return h.ws.flushErrno }

func (h *lazyHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.ws.mu.Lock()
	e := h.writeErr()
	if e == 0 {
		e = h.ws.finishLazy(h.in)
	}
	h.ws.mu.Unlock()
	if e != 0 {
		return e
	}
	return h.ws.errno(h.f.Sync())
}

func (h *lazyHandle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	h.ws.mu.Lock()
	defer h.ws.mu.Unlock()
	if e := h.ws.privsOnWrite(ctx, h.in); e != 0 {
		return e
	}
	if e := h.ws.finishLazy(h.in); e != 0 {
		return e
	}
	return h.ws.errno(unix.Fallocate(int(h.f.Fd()), mode, int64(off), int64(size)))
}

func (h *lazyHandle) Release(ctx context.Context) syscall.Errno {
	ws := h.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	e := h.writeErr() // logged: close(2) has returned already
	h.in.upperOpens--
	if l := h.in.lazy; l != nil {
		l.writers--
		if l.writers == 0 {
			if e2 := ws.finishLazy(h.in); e == 0 {
				e = e2
			}
		}
	}
	h.f.Close()
	ws.maybeDropData(h.in)
	return e
}

// openLazy opens a lazily copied-up file for writing.
func (ws *Workspace) openLazy(in *inode, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if in.lazy == nil {
		if e := ws.startLazy(in); e != 0 {
			return nil, 0, e
		}
	}
	f, err := os.OpenFile(ws.upperPath(in), int(flags&^openFlagsDropped&^syscall.O_DIRECT)|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, ws.errno(err)
	}
	in.lazy.writers++
	in.upperOpens++
	return &lazyHandle{f: f, ws: ws, in: in}, fuse.FOPEN_DIRECT_IO, 0
}

// wantsLazy says whether an open should copy up lazily.
func wantsLazy(in *inode, flags uint32) bool {
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY || flags&syscall.O_TRUNC != 0 {
		return false
	}
	if in.lazy != nil {
		return true
	}
	return !in.upper && in.blobOpens == 0 && in.size >= lazyMinSize
}
