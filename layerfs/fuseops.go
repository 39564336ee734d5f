//go:build linux

package layerfs

// This file wraps every request method of go-fuse's RawFileSystem to count
// and time it. It was generated from that interface; keep it in step.

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

type opcode int

// The FUSE requests telemetry counts, one per RawFileSystem method.
const (
	opLookup opcode = iota
	opForget
	opGetAttr
	opSetAttr
	opMknod
	opMkdir
	opUnlink
	opRmdir
	opRename
	opLink
	opSymlink
	opReadlink
	opAccess
	opGetXAttr
	opListXAttr
	opSetXAttr
	opRemoveXAttr
	opCreate
	opTmpfile
	opOpen
	opRead
	opLseek
	opGetLk
	opSetLk
	opSetLkw
	opRelease
	opWrite
	opWritev
	opCopyFileRange
	opIoctl
	opFlush
	opFsync
	opFallocate
	opOpenDir
	opReadDir
	opReadDirPlus
	opReleaseDir
	opFsyncDir
	opStatFs
	opStatx
	opCount
)

var opNames = [opCount]string{
	opLookup:        "LOOKUP",
	opForget:        "FORGET",
	opGetAttr:       "GETATTR",
	opSetAttr:       "SETATTR",
	opMknod:         "MKNOD",
	opMkdir:         "MKDIR",
	opUnlink:        "UNLINK",
	opRmdir:         "RMDIR",
	opRename:        "RENAME",
	opLink:          "LINK",
	opSymlink:       "SYMLINK",
	opReadlink:      "READLINK",
	opAccess:        "ACCESS",
	opGetXAttr:      "GETXATTR",
	opListXAttr:     "LISTXATTR",
	opSetXAttr:      "SETXATTR",
	opRemoveXAttr:   "REMOVEXATTR",
	opCreate:        "CREATE",
	opTmpfile:       "TMPFILE",
	opOpen:          "OPEN",
	opRead:          "READ",
	opLseek:         "LSEEK",
	opGetLk:         "GETLK",
	opSetLk:         "SETLK",
	opSetLkw:        "SETLKW",
	opRelease:       "RELEASE",
	opWrite:         "WRITE",
	opWritev:        "WRITEV",
	opCopyFileRange: "COPYFILERANGE",
	opIoctl:         "IOCTL",
	opFlush:         "FLUSH",
	opFsync:         "FSYNC",
	opFallocate:     "FALLOCATE",
	opOpenDir:       "OPENDIR",
	opReadDir:       "READDIR",
	opReadDirPlus:   "READDIRPLUS",
	opReleaseDir:    "RELEASEDIR",
	opFsyncDir:      "FSYNCDIR",
	opStatFs:        "STATFS",
	opStatx:         "STATX",
}

// countingFS counts and times every request it passes on.
type countingFS struct {
	fuse.RawFileSystem
	t *telemetry
	// releaseDone is called once a RELEASE is completely handled (see
	// handle.Release).
	releaseDone func(cancel <-chan struct{})
}

func (c *countingFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Lookup(cancel, header, name, out)
	c.t.record(opLookup, t0)
	return r0
}

func (c *countingFS) Forget(nodeid uint64, nlookup uint64) {
	t0 := time.Now()
	c.RawFileSystem.Forget(nodeid, nlookup)
	c.t.record(opForget, t0)
}

func (c *countingFS) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.GetAttr(cancel, input, out)
	c.t.record(opGetAttr, t0)
	return r0
}

func (c *countingFS) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.SetAttr(cancel, input, out)
	c.t.record(opSetAttr, t0)
	return r0
}

func (c *countingFS) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Mknod(cancel, input, name, out)
	c.t.record(opMknod, t0)
	return r0
}

func (c *countingFS) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Mkdir(cancel, input, name, out)
	c.t.record(opMkdir, t0)
	return r0
}

func (c *countingFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Unlink(cancel, header, name)
	c.t.record(opUnlink, t0)
	return r0
}

func (c *countingFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Rmdir(cancel, header, name)
	c.t.record(opRmdir, t0)
	return r0
}

func (c *countingFS) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Rename(cancel, input, oldName, newName)
	c.t.record(opRename, t0)
	return r0
}

func (c *countingFS) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Link(cancel, input, filename, out)
	c.t.record(opLink, t0)
	return r0
}

func (c *countingFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
	c.t.record(opSymlink, t0)
	return r0
}

func (c *countingFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.Readlink(cancel, header)
	c.t.record(opReadlink, t0)
	return r0, r1
}

func (c *countingFS) Access(cancel <-chan struct{}, input *fuse.AccessIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Access(cancel, input)
	c.t.record(opAccess, t0)
	return r0
}

func (c *countingFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.GetXAttr(cancel, header, attr, dest)
	c.t.record(opGetXAttr, t0)
	return r0, r1
}

func (c *countingFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.ListXAttr(cancel, header, dest)
	c.t.record(opListXAttr, t0)
	return r0, r1
}

func (c *countingFS) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.SetXAttr(cancel, input, attr, data)
	c.t.record(opSetXAttr, t0)
	return r0
}

func (c *countingFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.RemoveXAttr(cancel, header, attr)
	c.t.record(opRemoveXAttr, t0)
	return r0
}

func (c *countingFS) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Create(cancel, input, name, out)
	c.t.record(opCreate, t0)
	return r0
}

func (c *countingFS) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Tmpfile(cancel, input, out)
	c.t.record(opTmpfile, t0)
	return r0
}

func (c *countingFS) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Open(cancel, input, out)
	c.t.record(opOpen, t0)
	return r0
}

func (c *countingFS) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.Read(cancel, input, buf)
	c.t.record(opRead, t0)
	return r0, r1
}

func (c *countingFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Lseek(cancel, in, out)
	c.t.record(opLseek, t0)
	return r0
}

func (c *countingFS) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.GetLk(cancel, input, out)
	c.t.record(opGetLk, t0)
	return r0
}

func (c *countingFS) SetLk(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.SetLk(cancel, input)
	c.t.record(opSetLk, t0)
	return r0
}

func (c *countingFS) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.SetLkw(cancel, input)
	c.t.record(opSetLkw, t0)
	return r0
}

func (c *countingFS) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	t0 := time.Now()
	c.RawFileSystem.Release(cancel, input)
	if c.releaseDone != nil {
		c.releaseDone(cancel)
	}
	c.t.record(opRelease, t0)
}

func (c *countingFS) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.Write(cancel, input, data)
	c.t.record(opWrite, t0)
	return r0, r1
}

func (c *countingFS) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.Writev(cancel, input, data)
	c.t.record(opWritev, t0)
	return r0, r1
}

func (c *countingFS) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	t0 := time.Now()
	r0, r1 := c.RawFileSystem.CopyFileRange(cancel, input)
	c.t.record(opCopyFileRange, t0)
	return r0, r1
}

func (c *countingFS) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
	c.t.record(opIoctl, t0)
	return r0
}

func (c *countingFS) Flush(cancel <-chan struct{}, input *fuse.FlushIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Flush(cancel, input)
	c.t.record(opFlush, t0)
	return r0
}

func (c *countingFS) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Fsync(cancel, input)
	c.t.record(opFsync, t0)
	return r0
}

func (c *countingFS) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Fallocate(cancel, input)
	c.t.record(opFallocate, t0)
	return r0
}

func (c *countingFS) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.OpenDir(cancel, input, out)
	c.t.record(opOpenDir, t0)
	return r0
}

func (c *countingFS) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.ReadDir(cancel, input, out)
	c.t.record(opReadDir, t0)
	return r0
}

func (c *countingFS) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.ReadDirPlus(cancel, input, out)
	c.t.record(opReadDirPlus, t0)
	return r0
}

func (c *countingFS) ReleaseDir(input *fuse.ReleaseIn) {
	t0 := time.Now()
	c.RawFileSystem.ReleaseDir(input)
	c.t.record(opReleaseDir, t0)
}

func (c *countingFS) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.FsyncDir(cancel, input)
	c.t.record(opFsyncDir, t0)
	return r0
}

func (c *countingFS) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.StatFs(cancel, input, out)
	c.t.record(opStatFs, t0)
	return r0
}

func (c *countingFS) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	t0 := time.Now()
	r0 := c.RawFileSystem.Statx(cancel, input, out)
	c.t.record(opStatx, t0)
	return r0
}
