//go:build linux

package layerfs

import "github.com/hanwen/go-fuse/v2/fuse"

// fuseops_gen.go holds an opcode, its request name and a countingFS method
// for every request method of go-fuse's RawFileSystem, generated from that
// interface so that they stay in step with it.
//go:generate go run ./internal/gencounting -o fuseops_gen.go

// opcode is one kind of FUSE request that telemetry counts.
type opcode int

// countingFS counts and times every request it passes on (each of its
// methods is `defer c.t.record(op, time.Now())` around the call).
type countingFS struct {
	fuse.RawFileSystem
	t *telemetry
}

// afterRelease calls done once the file system beneath has handled a
// RELEASE (see Workspace.releaseDone); countingFS times it as part of the
// RELEASE.
type afterRelease struct {
	fuse.RawFileSystem
	done func(cancel <-chan struct{})
}

func (a *afterRelease) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	a.RawFileSystem.Release(cancel, input)
	a.done(cancel)
}
