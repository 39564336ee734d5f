// Package uring serves a go-fuse file system over FUSE-over-io_uring, the
// transport Linux 6.14 added beside reads and writes of /dev/fuse.
//
// Over /dev/fuse every request is a wake-up of a daemon thread that may sit
// on another CPU, and that cross-CPU wake-up is most of what a small
// metadata request costs. Over io_uring the kernel queues each request on
// the ring of the CPU that made it, and a thread pinned to that CPU answers
// it and fetches the next one in a single io_uring_enter: the round trip
// stays on one CPU.
//
// # What runs where
//
// Mount mounts the file system itself (mount(2), so it needs root), hands
// the /dev/fuse descriptor to go-fuse's fuse.Server through the /dev/fd/N
// mount point, and asks for FUSE_OVER_IO_URING in INIT, which that Server
// answers. The Server then stays the file system's handle for
// notifications and for the passthrough backing-file ioctls
// (FUSE_DEV_IOC_BACKING_OPEN/CLOSE), which go to /dev/fuse. When the kernel
// grants io_uring, Mount registers one queue per possible CPU (the kernel
// wants all of them before it routes a single request to a ring), each
// with QueueDepth entries, and serves each queue from a goroutine locked to
// its OS thread and pinned to its CPU: the kernel completes a ring command
// on the task that submitted it, so a goroutine that changed threads
// between submit and wait would stall its queue. Requests on the rings go
// to go-fuse's fuse.ProtocolServer over the same RawFileSystem, and each
// answer goes back with COMMIT_AND_FETCH. What still comes on /dev/fuse
// (FORGET, INTERRUPT) is read by this package's own loop and handed to the
// same ProtocolServer, so that an INTERRUPT finds the ring request it is
// for; that loop also sees the unmount (ENODEV).
//
// A request that may block for as long as another request takes to come
// (SETLKW, IOCTL, POLL) is served on its own goroutine, so that the lock's
// release, which the kernel may queue on the same CPU's ring, is not stuck
// behind it; everything else is served inline on the queue's thread.
//
// # Selection and fallback
//
// Options.Transport is Auto (io_uring where the kernel grants it, /dev/fuse
// otherwise, and Server.Reason says why), URing (an error wrapping
// ErrNotNegotiated instead of a fallback) or Dev (go-fuse's own mount and
// loop, as before this package). The kernel offers FUSE_OVER_IO_URING only
// when the fuse module's enable_uring parameter is on (off by default):
// see Available, Enabled and SetEnabled.
//
// # What go-fuse's seam lacks
//
// fuse.ProtocolServer is a second protocol state beside the Server's, and
// the two share nothing: the ProtocolServer does not see INIT (this package
// replays the kernel's INIT to it), and its in-flight table is not the
// Server's, so the Server's own read loop cannot be used beside the rings
// (an INTERRUPT would not find its request); this package reads /dev/fuse
// itself instead, and NOTIFY_RETRIEVE replies, which go to the Server's
// table, are not supported on an io_uring mount. The Server does not expose
// its /dev/fuse descriptor either (the /dev/fd/N mount point is how this
// package holds it), and its WaitMount skips the FUSE_POLL hack for such a
// mount point, which this package then does itself. HandleRequest also
// allocates a request per call where the Server's loop pools them.
package uring
