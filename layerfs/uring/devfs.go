//go:build linux

package uring

//go:generate go run ../internal/gencounting -mode dev -o devfs_gen.go

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// devFS is the RawFileSystem go-fuse's fuse.Server calls when it reads
// /dev/fuse (the Dev transport, or a kernel that did not offer io_uring):
// the file system itself, counting the requests that reach it that way, so
// that Stats can tell the two transports apart (a devLoop counts into the
// same fields). The wrapper of every request method is generated
// (devfs_gen.go); FORGET is counted on its own, since it always comes
// through /dev/fuse.
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
