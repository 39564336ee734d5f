//go:build linux

package layerfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is the FUSE side of an inode. go-fuse may forget and recreate nodes;
// the inode, owned by the Workspace's tree, is what lasts.
type node struct {
	fs.Inode
	ws *Workspace
	in *inode
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

func (ws *Workspace) fillAttr(in *inode, out *fuse.Attr) {
	if in.upper {
		ws.refreshUpper(in)
	}
	out.Ino = in.ino
	out.Mode = in.mode
	out.Nlink = in.nlink
	out.Uid, out.Gid = in.uid, in.gid
	out.Rdev = uint32(in.rdev)
	out.Size = uint64(in.size)
	if in.isDir() && in.size == 0 {
		out.Size = 4096
	}
	out.Blocks = (out.Size + 4095) / 4096 * 8
	out.Blksize = 4096
	out.Atime, out.Atimensec = uint64(in.atime/1e9), uint32(in.atime%1e9)
	out.Mtime, out.Mtimensec = uint64(in.mtime/1e9), uint32(in.mtime%1e9)
	out.Ctime, out.Ctimensec = uint64(in.ctime/1e9), uint32(in.ctime%1e9)
}

// loadDir makes sure a directory's entries are in memory. The load is not
// cancelled with the request that asked for it: the kernel interrupts a
// request whenever its caller gets a signal (a Go program's goroutine
// preemption sends them all the time), and a directory read from the
// Store takes milliseconds and serves every later request. Cancelling it
// failed lookups with EIO under load.
func (ws *Workspace) loadDir(ctx context.Context, in *inode) syscall.Errno {
	if in.children != nil {
		return 0
	}
	entries, err := ws.store.loadTree(context.WithoutCancel(ctx), in.tree)
	if err != nil {
		return ws.failed(fmt.Errorf("loading directory inode %d: %w", in.ino, err))
	}
	in.children = make(map[string]*inode, len(entries))
	for i := range entries {
		in.children[entries[i].Name] = ws.inodeFromEntry(in, &entries[i])
	}
	return 0
}

func (n *node) child(ctx context.Context, in *inode, out *fuse.EntryOut) *fs.Inode {
	n.ws.fillAttr(in, &out.Attr)
	return n.NewInode(ctx, &node{ws: n.ws, in: in}, fs.StableAttr{Mode: in.mode & syscall.S_IFMT, Ino: in.ino, Gen: 1})
}

// nameMax is the longest name component, in bytes, as on the kernel's own
// filesystems (NAME_MAX). The kernel passes FUSE longer ones (up to 1024
// bytes) and leaves the answer to the daemon: ENAMETOOLONG to every call
// that names one. LOOKUP saying so covers every path through the kernel;
// the calls that add or remove a name check too.
const nameMax = 255

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := ws.loadDir(ctx, n.in); e != 0 {
		return nil, e
	}
	c, ok := n.in.children[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return n.child(ctx, c, out), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.ws.mu.Lock()
	n.ws.fillAttr(n.in, &out.Attr)
	n.ws.mu.Unlock()
	return 0
}

// Statx answers ENOSYS: the kernel then uses GETATTR, which knows the merged
// view (the data file's own statx would not).
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// owner returns the owner of a new file in dir, honouring a set-group-ID
// directory.
func owner(ctx context.Context, dir *inode) (uint32, uint32) {
	uid, gid := caller(ctx)
	if dir.mode&syscall.S_ISGID != 0 {
		gid = dir.gid
	}
	return uid, gid
}

// changed moves in's ctime to now, after a change of its metadata that
// its data file does not see (a name added or removed, an extended
// attribute). An upper file's ctime is its data file's (refreshUpper
// reads it back at every GETATTR), so the data file gets a chmod to the
// mode it has, which changes nothing but its ctime.
func (ws *Workspace) changed(in *inode) {
	in.ctime = nowNs()
	if in.upper {
		if err := unix.Chmod(ws.upperPath(in), in.mode&07777); err != nil {
			ws.logf("updating the ctime of inode %d: %v", in.ino, err)
		}
	}
}

func (ws *Workspace) touchDir(dir *inode) {
	now := nowNs()
	dir.mtime, dir.ctime = now, now
}

// copyUp gives a base file an upper data file, with its content unless the
// caller is about to truncate it anyway. It refuses (ETXTBSY) while handles
// read the base blob: the kernel serves those by passthrough from the blob,
// and one FUSE inode can have only one backing file at a time.
func (ws *Workspace) copyUp(in *inode, truncate bool) syscall.Errno {
	return ws.copyUpWith(in, truncate, false)
}

// cloneUp copies in up by sharing the blob's extents (FICLONE), where the
// Store's filesystem can (XFS, btrfs): then even a large file opened
// write-only is copied up at once and written by passthrough, rather than
// lazily through the daemon. It reports whether in is now in the overlay.
func (ws *Workspace) cloneUp(in *inode) bool {
	if ws.noClone || in.upper || in.lazy != nil {
		return false
	}
	return ws.copyUpWith(in, false, true) == 0
}

// copyUpWith copies in's data from its blob into a new upper data file: by
// FICLONE where the filesystem shares extents, else by copying; with
// cloneOnly, it fails rather than copy.
func (ws *Workspace) copyUpWith(in *inode, truncate, cloneOnly bool) syscall.Errno {
	if in.upper {
		return 0
	}
	if in.blobOpens > 0 {
		ws.waitBlobClosed(in)
		if in.upper {
			return 0 // copied up by another request meanwhile
		}
		if in.blobOpens > 0 {
			return syscall.ETXTBSY
		}
	}
	p := ws.upperPath(in)
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return ws.failed(fmt.Errorf("copy-up of inode %d: %w", in.ino, err))
	}
	fail := func(err error) syscall.Errno {
		dst.Close()
		os.Remove(p)
		return ws.failed(fmt.Errorf("copy-up of inode %d: %w", in.ino, err))
	}
	if !truncate && in.size > 0 {
		if err := ws.verifyFor(context.Background(), in.blob); err != nil {
			dst.Close()
			os.Remove(p)
			return syscall.EIO
		}
		src, err := os.Open(ws.store.blobPath(in.blob))
		if err != nil {
			return fail(err)
		}
		cloned := false
		if !ws.noClone {
			err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
			switch {
			case err == nil:
				cloned = true
				ws.tel.clonedCopyUps.Add(1)
			case err == unix.EOPNOTSUPP || err == unix.ENOTTY || err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS:
				ws.noClone = true // not on this filesystem, or not across these two
			}
		}
		if !cloned && cloneOnly {
			src.Close()
			dst.Close()
			os.Remove(p)
			return syscall.EOPNOTSUPP
		}
		if !cloned {
			// Data extents only: the blob's holes stay holes.
			n, err := copySparse(context.Background(), src, dst, 0, in.size)
			if err == nil {
				err = dst.Truncate(in.size)
			}
			if err != nil {
				src.Close()
				return fail(err)
			}
			ws.tel.copyUpBytes.Add(n)
		}
		src.Close()
	}
	fd := int(dst.Fd())
	if err := unix.Fchmod(fd, in.mode&07777); err != nil {
		return fail(err)
	}
	if err := unix.Fchown(fd, int(in.uid), int(in.gid)); err != nil {
		return fail(err)
	}
	if err := unix.Fchmod(fd, in.mode&07777); err != nil { // chown clears set-ID bits
		return fail(err)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(in.atime), unix.NsecToTimespec(in.mtime)}
	if truncate {
		ts[1] = unix.NsecToTimespec(nowNs())
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(p)
		return ws.errno(err)
	}
	in.upper = true
	ws.tel.copyUps.Add(1)
	return 0
}

// handle is an open regular file: a LoopbackFile on the blob or the upper
// data file, whose descriptor the kernel uses for passthrough.
type handle struct {
	*fs.LoopbackFile
	ws     *Workspace
	in     *inode
	onBlob bool
}

// Flush has nothing to do: see flushErrno.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.ws.flushErrno }

// Release closes the descriptor. The handle stops counting as open only
// once go-fuse has also dropped the kernel backing file it registered for
// it (afterRelease calls releaseDone), so that a copy-up never races
// with a backing file that is still registered for the inode.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	e := h.LoopbackFile.Release(ctx)
	ws := h.ws
	ws.mu.Lock()
	if fc, ok := ctx.(*fuse.Context); ok && fc.Cancel != nil {
		ws.releasing[fc.Cancel] = h
	} else {
		ws.finishRelease(h)
	}
	ws.mu.Unlock()
	return e
}

// releaseDone is called after go-fuse has finished a RELEASE request.
func (ws *Workspace) releaseDone(cancel <-chan struct{}) {
	ws.mu.Lock()
	if h, ok := ws.releasing[cancel]; ok {
		delete(ws.releasing, cancel)
		ws.finishRelease(h)
	}
	ws.mu.Unlock()
}

func (ws *Workspace) finishRelease(h *handle) {
	if h.onBlob {
		h.in.blobOpens--
	} else {
		h.in.upperOpens--
	}
	ws.maybeDropData(h.in)
}

// waitBlobClosed waits a little for handles on the base blob to go: a
// close(2) returns before its RELEASE reaches the daemon, so a file read
// and then written at once would otherwise see its reader still open.
func (ws *Workspace) waitBlobClosed(in *inode) {
	delay := 20 * time.Microsecond
	for waited := time.Duration(0); in.blobOpens > 0 && waited < time.Second; waited += delay {
		ws.mu.Unlock()
		time.Sleep(delay)
		ws.mu.Lock()
		if delay < 10*time.Millisecond {
			delay *= 2
		}
	}
}

// maybeDropData removes the data file of an inode that no name and no handle
// refers to any more. The removal itself happens in the background: data
// files are named by inode number, never reused, so nothing can want the
// name meanwhile, and unlink(2) on the disk need not delay unlink on the
// Workspace.
func (ws *Workspace) maybeDropData(in *inode) {
	if in.nlink == 0 && in.upper && in.upperOpens == 0 {
		p := ws.upperPath(in)
		in.upper = false
		if ws.closed { // Unmount closes reap once closed is set
			os.Remove(p)
			return
		}
		select {
		case ws.reap <- p:
		default:
			os.Remove(p)
		}
	}
}

// reaper removes dropped data files until reap is closed.
func (ws *Workspace) reaper() {
	defer close(ws.reaped)
	for p := range ws.reap {
		os.Remove(p)
	}
}

const openFlagsDropped = syscall.O_APPEND | syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOCTTY | fuse.FMODE_EXEC

func (ws *Workspace) openData(in *inode, flags uint32) (fs.FileHandle, syscall.Errno) {
	acc := flags & syscall.O_ACCMODE
	write := acc != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	if write && !in.upper {
		if e := ws.copyUp(in, flags&syscall.O_TRUNC != 0); e != 0 {
			return nil, e
		}
	}
	var f *os.File
	var err error
	h := &handle{ws: ws, in: in}
	if in.upper {
		f, err = os.OpenFile(ws.upperPath(in), int(flags&^openFlagsDropped)|syscall.O_CLOEXEC, 0)
	} else {
		h.onBlob = true
		if err := ws.verifyFor(context.Background(), in.blob); err != nil {
			return nil, syscall.EIO
		}
		f, err = os.OpenFile(ws.store.blobPath(in.blob), syscall.O_RDONLY|syscall.O_CLOEXEC|int(flags&syscall.O_DIRECT), 0)
	}
	if err != nil {
		return nil, ws.failed(fmt.Errorf("opening data of inode %d: %w", in.ino, err))
	}
	h.LoopbackFile = fs.NewLoopbackFileFromOS(f)
	if h.onBlob {
		in.blobOpens++
	} else {
		in.upperOpens++
	}
	return ws.fileHandle(h, acc != syscall.O_RDONLY), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !n.in.isRegular() {
		return nil, 0, syscall.EINVAL
	}
	if !n.in.upper && !n.in.blob.IsZero() && !ws.noVerify && flags&syscall.O_TRUNC == 0 {
		// The blob's first check hashes it whole: outside the lock,
		// so that other requests go on meanwhile.
		d := n.in.blob
		ws.mu.Unlock()
		err := ws.store.verifyBlob(ctx, d)
		ws.mu.Lock()
		if err != nil && !n.in.upper && n.in.blob == d {
			switch {
			case errors.Is(err, ErrBadBlob):
				ws.badBlob(ctx, d, err)
				return nil, 0, syscall.EIO
			case ctx.Err() != nil:
				return nil, 0, syscall.EINTR
			}
			return nil, 0, ws.failed(fmt.Errorf("checking blob %s: %w", d.Short(), err))
		}
	}
	if wantsLazy(n.in, flags) && !ws.cloneUp(n.in) {
		return ws.openLazy(n.in, flags)
	}
	if e := ws.finishLazy(n.in); e != 0 {
		return nil, 0, e
	}
	h, e := ws.openData(n.in, flags)
	return h, 0, e
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if len(name) > nameMax {
		return nil, nil, 0, syscall.ENAMETOOLONG
	}
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := ws.loadDir(ctx, n.in); e != 0 {
		return nil, nil, 0, e
	}
	if n.in.nlink == 0 {
		return nil, nil, 0, syscall.ENOENT
	}
	if _, ok := n.in.children[name]; ok {
		return nil, nil, 0, syscall.EEXIST
	}
	uid, gid := owner(ctx, n.in)
	in := ws.newInode(syscall.S_IFREG|mode&07777, uid, gid)
	f, e := ws.createData(in, flags)
	if e != 0 {
		return nil, nil, 0, e
	}
	h := &handle{LoopbackFile: fs.NewLoopbackFileFromOS(f), ws: ws, in: in}
	in.upperOpens++
	ws.link(n.in, name, in)
	ws.touchDir(n.in)
	return n.child(ctx, in, out), ws.fileHandle(h, flags&syscall.O_ACCMODE != syscall.O_RDONLY), 0, 0
}

// createData creates the empty upper data file of a new regular file, open
// with flags, and fills in its attributes: one open, one fstat, and a chown
// or chmod only when the open could not get them right.
func (ws *Workspace) createData(in *inode, flags uint32) (*os.File, syscall.Errno) {
	p := ws.upperPath(in)
	acc := int(flags & syscall.O_ACCMODE)
	if acc == syscall.O_RDONLY {
		acc = syscall.O_RDWR // mknod: keep it simple, the fd is closed at once
	}
	perm := in.mode & 07777
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|acc|int(flags&syscall.O_DIRECT), perm)
	if err != nil {
		return nil, ws.errno(err)
	}
	fail := func(err error) (*os.File, syscall.Errno) {
		unix.Close(fd)
		os.Remove(p)
		return nil, ws.errno(err)
	}
	if in.uid != ws.euid || in.gid != ws.egid {
		if err := unix.Fchown(fd, int(in.uid), int(in.gid)); err != nil {
			return fail(err)
		}
		if perm&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			perm |= 0o10000 // force the chmod below: chown cleared set-ID bits
		}
	}
	if perm&ws.umask != 0 {
		if err := unix.Fchmod(fd, in.mode&07777); err != nil {
			return fail(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	in.upper = true
	in.mode = in.mode&syscall.S_IFMT | st.Mode&07777
	in.uid, in.gid, in.size = st.Uid, st.Gid, st.Size
	in.atime, in.mtime, in.ctime = timespecNs(st.Atim), timespecNs(st.Mtim), timespecNs(st.Ctim)
	return os.NewFile(uintptr(fd), p), 0
}

// whiteout records that c, removed from dir's name, was a base entry there.
func (ws *Workspace) whiteout(dir *inode, name string, c *inode) {
	if c.baseParent != dir || c.baseName != name {
		return
	}
	c.baseParent = nil
	if dir.whiteouts == nil {
		dir.whiteouts = map[string]bool{}
	}
	dir.whiteouts[name] = c.isDir()
	ws.tel.whiteouts.Add(1)
}

// link adds a name for in to dir.
func (ws *Workspace) link(dir *inode, name string, in *inode) {
	dir.children[name] = in
	if in.isDir() {
		dir.nlink++
	}
}

// unlinkName removes a name from dir; the caller has checked it exists.
func (ws *Workspace) unlinkName(dir *inode, name string) {
	c := dir.children[name]
	delete(dir.children, name)
	ws.whiteout(dir, name, c)
	if c.isDir() {
		dir.nlink--
		c.nlink = 0
	} else {
		c.nlink--
		ws.changed(c)
	}
	ws.maybeDropData(c)
}

func (n *node) newChild(ctx context.Context, name string, in *inode, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ws := n.ws
	ws.link(n.in, name, in)
	ws.touchDir(n.in)
	return n.child(ctx, in, out), 0
}

func (n *node) checkNew(ctx context.Context, name string) syscall.Errno {
	if len(name) > nameMax {
		return syscall.ENAMETOOLONG
	}
	if e := n.ws.loadDir(ctx, n.in); e != 0 {
		return e
	}
	if n.in.nlink == 0 {
		return syscall.ENOENT
	}
	if _, ok := n.in.children[name]; ok {
		return syscall.EEXIST
	}
	return 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := n.checkNew(ctx, name); e != 0 {
		return nil, e
	}
	uid, gid := owner(ctx, n.in)
	mode &= 07777
	if n.in.mode&syscall.S_ISGID != 0 {
		mode |= syscall.S_ISGID
	}
	in := ws.newInode(syscall.S_IFDIR|mode, uid, gid)
	in.nlink = 2
	in.children = map[string]*inode{}
	in.tree = emptyTree
	if n.in.whiteouts[name] {
		in.opaque = true
		ws.tel.opaqueDirs.Add(1)
	}
	return n.newChild(ctx, name, in, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := n.checkNew(ctx, name); e != 0 {
		return nil, e
	}
	uid, gid := owner(ctx, n.in)
	if mode&syscall.S_IFMT == 0 {
		mode |= syscall.S_IFREG
	}
	in := ws.newInode(mode, uid, gid)
	in.rdev = uint64(rdev)
	if in.isRegular() {
		f, e := ws.createData(in, syscall.O_RDWR)
		if e != 0 {
			return nil, e
		}
		f.Close()
	}
	return n.newChild(ctx, name, in, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := n.checkNew(ctx, name); e != 0 {
		return nil, e
	}
	uid, gid := caller(ctx)
	if n.in.mode&syscall.S_ISGID != 0 {
		gid = n.in.gid
	}
	in := ws.newInode(syscall.S_IFLNK|0o777, uid, gid)
	in.target = target
	in.size = int64(len(target))
	return n.newChild(ctx, name, in, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	n.ws.mu.Lock()
	defer n.ws.mu.Unlock()
	if n.in.mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, syscall.EINVAL
	}
	return []byte(n.in.target), 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok || t.ws != n.ws {
		return nil, syscall.EXDEV
	}
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if t.in.isDir() {
		return nil, syscall.EPERM
	}
	if t.in.nlink == 0 {
		return nil, syscall.ENOENT
	}
	if e := n.checkNew(ctx, name); e != 0 {
		return nil, e
	}
	t.in.nlink++
	ws.changed(t.in)
	return n.newChild(ctx, name, t.in, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, false)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, true)
}

// remove is Unlink (dir false) and Rmdir (dir true): name must be of that
// kind, and a directory must be empty, its base entries included.
func (n *node) remove(ctx context.Context, name string, dir bool) syscall.Errno {
	if len(name) > nameMax {
		return syscall.ENAMETOOLONG
	}
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := ws.loadDir(ctx, n.in); e != 0 {
		return e
	}
	c, ok := n.in.children[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case c.isDir() && !dir:
		return syscall.EISDIR
	case !c.isDir() && dir:
		return syscall.ENOTDIR
	}
	if dir {
		if e := ws.loadDir(ctx, c); e != 0 {
			return e
		}
		if len(c.children) > 0 {
			return syscall.ENOTEMPTY
		}
	}
	ws.unlinkName(n.in, name)
	ws.touchDir(n.in)
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || np.ws != n.ws {
		return syscall.EXDEV
	}
	if len(name) > nameMax || len(newName) > nameMax {
		return syscall.ENAMETOOLONG
	}
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
		return syscall.EINVAL
	}
	src, dst := n.in, np.in
	if e := ws.loadDir(ctx, src); e != 0 {
		return e
	}
	if e := ws.loadDir(ctx, dst); e != 0 {
		return e
	}
	c, ok := src.children[name]
	if !ok {
		return syscall.ENOENT
	}
	if dst.nlink == 0 {
		return syscall.ENOENT
	}
	now := nowNs()
	old, exists := dst.children[newName]
	if flags&unix.RENAME_EXCHANGE != 0 {
		if !exists {
			return syscall.ENOENT
		}
		src.children[name], dst.children[newName] = old, c
		if c.isDir() != old.isDir() && src != dst {
			if c.isDir() {
				src.nlink--
				dst.nlink++
			} else {
				src.nlink++
				dst.nlink--
			}
		}
		ws.changed(c)
		ws.changed(old)
		src.mtime, src.ctime, dst.mtime, dst.ctime = now, now, now, now
		return 0
	}
	if exists {
		if flags&unix.RENAME_NOREPLACE != 0 {
			return syscall.EEXIST
		}
		if old == c {
			return 0 // two names of one file: POSIX says do nothing
		}
		if c.isDir() {
			if !old.isDir() {
				return syscall.ENOTDIR
			}
			if e := ws.loadDir(ctx, old); e != 0 {
				return e
			}
			if len(old.children) > 0 {
				return syscall.ENOTEMPTY
			}
		} else if old.isDir() {
			return syscall.EISDIR
		}
		ws.unlinkName(dst, newName)
	}
	delete(src.children, name)
	ws.whiteout(src, name, c)
	if c.isDir() {
		src.nlink--
	}
	ws.link(dst, newName, c)
	ws.changed(c)
	src.mtime, src.ctime, dst.mtime, dst.ctime = now, now, now, now
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, sa *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	in := n.in
	if e := ws.privsOnSetattr(ctx, in, sa); e != 0 {
		return e
	}
	if sz, ok := sa.GetSize(); ok {
		if in.isDir() {
			return syscall.EISDIR
		}
		if !in.isRegular() {
			return syscall.EINVAL
		}
		if !in.upper {
			if e := ws.copyUp(in, sz == 0); e != 0 {
				return e
			}
		}
		if e := ws.finishLazy(in); e != 0 {
			return e
		}
		if err := unix.Truncate(ws.upperPath(in), int64(sz)); err != nil {
			return n.ws.errno(err)
		}
	}
	now := nowNs()
	if m, ok := sa.GetMode(); ok {
		in.mode = in.mode&syscall.S_IFMT | m&07777
		if in.upper {
			if err := unix.Chmod(ws.upperPath(in), m&07777); err != nil {
				return n.ws.errno(err)
			}
		}
	}
	uid, uok := sa.GetUID()
	gid, gok := sa.GetGID()
	if uok || gok {
		if uok {
			in.uid = uid
		}
		if gok {
			in.gid = gid
		}
		if in.upper {
			if err := unix.Lchown(ws.upperPath(in), int(in.uid), int(in.gid)); err != nil {
				return n.ws.errno(err)
			}
			// chown clears set-ID bits on the data file; in.mode is
			// what privsOnSetattr kept.
			unix.Chmod(ws.upperPath(in), in.mode&07777)
		}
	}
	mt, mok := sa.GetMTime()
	at, aok := sa.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			in.atime = at.UnixNano()
			ts[0] = unix.NsecToTimespec(in.atime)
		}
		if mok {
			in.mtime = mt.UnixNano()
			ts[1] = unix.NsecToTimespec(in.mtime)
		}
		if in.upper {
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, ws.upperPath(in), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return n.ws.errno(err)
			}
		}
	}
	if ct, ok := sa.GetCTime(); ok {
		in.ctime = ct.UnixNano()
	} else {
		in.ctime = now
	}
	ws.fillAttr(in, &out.Attr)
	return 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ws := n.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := ws.loadDir(ctx, n.in); e != 0 {
		return nil, 0, e
	}
	names := make([]string, 0, len(n.in.children))
	for name := range n.in.children {
		names = append(names, name)
	}
	sort.Strings(names)
	list := make([]fuse.DirEntry, 0, len(names)+2)
	list = append(list, fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: n.in.ino})
	list = append(list, fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR})
	for _, name := range names {
		c := n.in.children[name]
		list = append(list, fuse.DirEntry{Name: name, Mode: c.mode & syscall.S_IFMT, Ino: c.ino})
	}
	return fs.NewListDirStream(list), 0, 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.ws.upperDir, &st); err != nil {
		return n.ws.errno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.ws.mu.Lock()
	defer n.ws.mu.Unlock()
	v, ok := n.in.xattrs[attr]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	n.ws.mu.Lock()
	defer n.ws.mu.Unlock()
	_, ok := n.in.xattrs[attr]
	if flags&unix.XATTR_CREATE != 0 && ok {
		return syscall.EEXIST
	}
	if flags&unix.XATTR_REPLACE != 0 && !ok {
		return syscall.ENODATA
	}
	if n.in.xattrs == nil {
		n.in.xattrs = map[string][]byte{}
	}
	n.in.xattrs[attr] = append([]byte(nil), data...)
	n.ws.changed(n.in)
	return 0
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	n.ws.mu.Lock()
	defer n.ws.mu.Unlock()
	if _, ok := n.in.xattrs[attr]; !ok {
		return syscall.ENODATA
	}
	delete(n.in.xattrs, attr)
	n.ws.changed(n.in)
	return 0
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.ws.mu.Lock()
	defer n.ws.mu.Unlock()
	names := make([]string, 0, len(n.in.xattrs))
	for k := range n.in.xattrs {
		names = append(names, k)
	}
	sort.Strings(names)
	var b []byte
	for _, k := range names {
		b = append(append(b, k...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	hi, ok1 := fhIn.(*handle)
	ho, ok2 := fhOut.(*handle)
	if !ok1 || !ok2 {
		return 0, syscall.ENOTSUP
	}
	return hi.copyRange(ho, int64(offIn), int64(offOut), int(length), int(flags))
}

func (h *handle) copyRange(o *handle, offIn, offOut int64, length, flags int) (uint32, syscall.Errno) {
	in, out := h.fd(), o.fd()
	if in < 0 || out < 0 {
		return 0, syscall.EBADF
	}
	if flags != 0 {
		n, err := unix.CopyFileRange(in, &offIn, out, &offOut, length, flags)
		return uint32(n), h.ws.errno(err)
	}
	n, err := copyRange(in, offIn, out, offOut, length)
	if n > 0 {
		err = nil // a short copy is a success
	}
	return uint32(n), h.ws.errno(err)
}

// fd returns the handle's descriptor (valid until Release).
func (h *handle) fd() int {
	fd, ok := h.PassthroughFd()
	if !ok {
		return -1
	}
	return fd
}
