//go:build linux

package layerfs

import (
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// inode is one file of a Workspace's merged view: its metadata, where its
// data is (a base blob or an upper data file), and for a directory its
// entries. Every field is guarded by Workspace.mu.
type inode struct {
	ino   uint64
	mode  uint32 // file type and permission bits
	uid   uint32
	gid   uint32
	rdev  uint64
	nlink uint32
	size  int64
	atime int64
	mtime int64
	ctime int64

	// Regular files: blob is the base content; once the file is copied
	// up, upper is set and the data file upperPath(ino) holds the
	// content, size and times.
	blob  Digest
	upper bool
	// sum caches the digest of the upper data file, keyed by the stat
	// fields that change whenever the file is written.
	sum      Digest
	sumStamp [3]int64 // ctime, mtime, size of the data file when sum was taken

	target string // symlinks
	xattrs map[string][]byte

	// Directories. children is nil until the base tree is loaded.
	children map[string]*inode
	tree     Digest // base tree; emptyTree for a new directory
	opaque   bool   // replaced a base directory: nothing below shows through
	// whiteouts names the base entries deleted from this directory (true
	// for a directory), which hide the base entry of that name.
	whiteouts map[string]bool
	// baseParent and baseName say where the inode was in the base Layer;
	// removing it from there leaves a whiteout.
	baseParent *inode
	baseName   string

	lazy *lazyCopy // set while a lazy copy-up is not finished (lazycopy.go)

	blobOpens  int // open handles served from the base blob
	upperOpens int // open handles on the upper data file
}

func (in *inode) isDir() bool     { return in.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (in *inode) isRegular() bool { return in.mode&syscall.S_IFMT == syscall.S_IFREG }

func nowNs() int64 { return time.Now().UnixNano() }

func (ws *Workspace) upperPath(in *inode) string {
	return ws.upperDir + "/" + strconv.FormatUint(in.ino, 10)
}

func (ws *Workspace) newInode(mode, uid, gid uint32) *inode {
	ws.nextIno++
	now := nowNs()
	return &inode{ino: ws.nextIno, mode: mode, uid: uid, gid: gid, nlink: 1,
		atime: now, mtime: now, ctime: now}
}

// inodeFromEntry makes the inode for a base entry. Hard-linked entries share
// one inode per Layer link group.
func (ws *Workspace) inodeFromEntry(dir *inode, e *Entry) *inode {
	if e.LinkID != 0 {
		if in, ok := ws.links[e.LinkID]; ok {
			return in
		}
	}
	ws.nextIno++
	in := &inode{
		ino: ws.nextIno, mode: e.Mode, uid: e.UID, gid: e.GID, rdev: e.Rdev, nlink: e.Nlink,
		size: e.Size, atime: e.Atime, mtime: e.Mtime, ctime: e.Ctime, target: e.Target,
		baseParent: dir, baseName: e.Name,
	}
	if in.nlink == 0 {
		in.nlink = 1
	}
	switch {
	case in.isDir():
		in.tree = e.Content
	case in.isRegular():
		in.blob = e.Content
	}
	if len(e.Xattrs) > 0 {
		in.xattrs = make(map[string][]byte, len(e.Xattrs))
		for _, x := range e.Xattrs {
			in.xattrs[x.Name] = x.Value
		}
	}
	if e.LinkID != 0 {
		ws.links[e.LinkID] = in
	}
	return in
}

// refreshUpper copies what the upper data file says (permissions, owner,
// size, mtime and ctime) into the inode: writes through passthrough reach the data file
// without passing through this process.
func (ws *Workspace) refreshUpper(in *inode) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Lstat(ws.upperPath(in), &st); err != nil {
		return ws.errno(err)
	}
	in.mode = in.mode&syscall.S_IFMT | st.Mode&07777
	in.uid, in.gid = st.Uid, st.Gid
	in.size = st.Size
	// Not atime: a Workspace is noatime (reads do not change a file, so
	// they never make a Commit necessary); atime changes only when set.
	in.mtime, in.ctime = timespecNs(st.Mtim), timespecNs(st.Ctim)
	return 0
}

// entry describes the inode as a Layer entry (Content and LinkID are set by
// the caller).
func (in *inode) entry(name string) Entry {
	e := Entry{Name: name, Mode: in.mode, UID: in.uid, GID: in.gid, Rdev: in.rdev, Nlink: in.nlink,
		Size: in.size, Atime: in.atime, Mtime: in.mtime, Ctime: in.ctime, Target: in.target}
	if len(in.xattrs) > 0 {
		e.Xattrs = make([]Xattr, 0, len(in.xattrs))
		for k, v := range in.xattrs {
			e.Xattrs = append(e.Xattrs, Xattr{Name: k, Value: v})
		}
		sort.Slice(e.Xattrs, func(i, j int) bool { return e.Xattrs[i].Name < e.Xattrs[j].Name })
	}
	return e
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	if pe, ok := err.(interface{ Unwrap() error }); ok {
		return errno(pe.Unwrap())
	}
	return syscall.EIO
}
