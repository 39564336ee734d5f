//go:build linux

package uring

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// devFS is the RawFileSystem go-fuse's fuse.Server calls when it reads
// /dev/fuse (the Dev transport, or a kernel that did not offer io_uring):
// the file system itself, counting the requests that reach it that way, so
// that Stats can tell the two transports apart (a devLoop counts into the
// same fields). One method per
// method of go-fuse v2.12.1's RawFileSystem; FORGET is counted on its own,
// since it always comes through /dev/fuse.
type devFS struct {
	fuse.RawFileSystem
	requests atomic.Int64
	forgets  atomic.Int64
}

var _ fuse.RawFileSystem = (*devFS)(nil)

func (d *devFS) count() { d.requests.Add(1) }

func (d *devFS) Forget(nodeid, nlookup uint64) {
	d.forgets.Add(1)
	d.RawFileSystem.Forget(nodeid, nlookup)
}

func (d *devFS) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	d.count()
	d.RawFileSystem.Release(cancel, input)
}

func (d *devFS) ReleaseDir(input *fuse.ReleaseIn) {
	d.count()
	d.RawFileSystem.ReleaseDir(input)
}

func (d *devFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) (status fuse.Status) {
	d.count()
	return d.RawFileSystem.Lookup(cancel, header, name, out)
}

func (d *devFS) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.GetAttr(cancel, input, out)
}

func (d *devFS) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.SetAttr(cancel, input, out)
}

func (d *devFS) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Mknod(cancel, input, name, out)
}

func (d *devFS) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Mkdir(cancel, input, name, out)
}

func (d *devFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Unlink(cancel, header, name)
}

func (d *devFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Rmdir(cancel, header, name)
}

func (d *devFS) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Rename(cancel, input, oldName, newName)
}

func (d *devFS) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Link(cancel, input, filename, out)
}

func (d *devFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
}

func (d *devFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) (out []byte, code fuse.Status) {
	d.count()
	return d.RawFileSystem.Readlink(cancel, header)
}

func (d *devFS) Access(cancel <-chan struct{}, input *fuse.AccessIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Access(cancel, input)
}

func (d *devFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (sz uint32, code fuse.Status) {
	d.count()
	return d.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (d *devFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (sz uint32, code fuse.Status) {
	d.count()
	return d.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (d *devFS) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.SetXAttr(cancel, input, attr, data)
}

func (d *devFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (d *devFS) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Create(cancel, input, name, out)
}

func (d *devFS) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Tmpfile(cancel, input, out)
}

func (d *devFS) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) (status fuse.Status) {
	d.count()
	return d.RawFileSystem.Open(cancel, input, out)
}

func (d *devFS) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (r fuse.ReadResult, code fuse.Status) {
	d.count()
	return d.RawFileSystem.Read(cancel, input, buf)
}

func (d *devFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Lseek(cancel, in, out)
}

func (d *devFS) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.GetLk(cancel, input, out)
}

func (d *devFS) SetLk(cancel <-chan struct{}, input *fuse.LkIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.SetLk(cancel, input)
}

func (d *devFS) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.SetLkw(cancel, input)
}

func (d *devFS) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (written uint32, code fuse.Status) {
	d.count()
	return d.RawFileSystem.Write(cancel, input, data)
}

func (d *devFS) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (written uint32, code fuse.Status) {
	d.count()
	return d.RawFileSystem.Writev(cancel, input, data)
}

func (d *devFS) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (written uint32, code fuse.Status) {
	d.count()
	return d.RawFileSystem.CopyFileRange(cancel, input)
}

func (d *devFS) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
}

func (d *devFS) Flush(cancel <-chan struct{}, input *fuse.FlushIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Flush(cancel, input)
}

func (d *devFS) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Fsync(cancel, input)
}

func (d *devFS) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Fallocate(cancel, input)
}

func (d *devFS) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) (status fuse.Status) {
	d.count()
	return d.RawFileSystem.OpenDir(cancel, input, out)
}

func (d *devFS) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.ReadDir(cancel, input, out)
}

func (d *devFS) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.ReadDirPlus(cancel, input, out)
}

func (d *devFS) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.FsyncDir(cancel, input)
}

func (d *devFS) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.StatFs(cancel, input, out)
}

func (d *devFS) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) (code fuse.Status) {
	d.count()
	return d.RawFileSystem.Statx(cancel, input, out)
}
