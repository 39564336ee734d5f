//go:build linux

// Package layerfs is LayerFS: a layered workspace filesystem whose states are
// kept in a Store and whose Workspaces are served over FUSE, by one daemon
// each in the product. cmd/layerfsd is its command line; layerfs/daemonapi
// is what that command line prints, shared with the runner.
//
// # Store
//
// A Store is one directory holding a SQLite database (layerfs.db, opened with
// the pure-Go modernc.org/sqlite driver so binaries stay static) and
// content-addressed blobs (blobs/ab/abcdef..., named by the SHA-256 of their
// bytes, or over 1 MiB by a chunked SHA-256 that skips holes (sparse.go);
// read-only once written, checked against their names on first open
// (verify.go; a stat where the blob's recorded stamp still holds,
// stamps.go), holes kept). The database holds tree objects (one per
// directory, also content-addressed, so identical subtrees are stored once)
// and Layers. Three profiles set how hard the Store works to survive a crash:
// Durable (WAL, synchronous=FULL, blobs synced before the transaction that
// names them), Fast (WAL, NORMAL) and Disposable (WAL, OFF). A database from
// a newer schema is refused (ErrNewerSchema), never written.
//
// # Layers
//
// A Layer is an immutable filesystem state: a root directory entry (mode,
// owner, times, root tree), a parent Layer, a message and a time. Its id is
// the SHA-256 of those fields. Files, directories, symlinks, device nodes,
// FIFOs, hard links, modes, owners, nanosecond times, sizes and extended
// attributes are kept exactly. Import makes a Layer from a directory tree;
// Diff compares two Layers without reading subtrees whose trees are equal.
//
// # Workspaces
//
// A Workspace is a FUSE mount of a Layer with a private writable overlay. The
// overlay keeps directory structure in memory (a directory's entries start as
// its base tree, loaded on first use; a deleted base entry becomes a whiteout,
// a directory that replaces a base one is opaque) and file data in a plain
// directory, named by inode number, so that the kernel can serve file data
// by FUSE passthrough. That directory is a fresh layerfs-ws-* inside the
// Store's overlay/ by default, or inside MountOptions.OverlayDir (a tmpfs,
// say); it lives as long as the mount. Base files are served straight from
// their blobs; the first write copies a file up.
//
// # Commit
//
// Commit turns the overlay into a new Layer whose parent is the base, or
// answers UpToDate when the tree is the base's. It hashes the changed data
// files in parallel (Workers: LAYERFS_CONSTRUCTION_WORKERS or the number of
// CPUs; a sum stays valid while a file's size and times do not change),
// builds tree objects only for directories that were loaded, moves each
// closed data file into the blobs by rename (a copy when the overlay is on
// another filesystem, a private copy for a file still open), and writes the
// Layer in one transaction. The new Layer becomes the Workspace's base. A
// Commit that fails or whose context ends puts everything back and removes
// the blobs it created; GC removes what a killed one left (gc.go).
//
// # Kernel features
//
// A Workspace asks the kernel for long entry, attribute and negative-entry
// timeouts (an hour by default: every change goes through the daemon, so the
// caches never go stale), READDIRPLUS, 1 MiB MaxWrite and, when the daemon
// runs as root, FUSE passthrough: the kernel then reads and writes file data
// straight from the blob or the upper data file, and READ and WRITE never
// reach the daemon. The kernel does not grant passthrough together with the
// writeback cache, so the writeback cache is off unless asked for
// (MountOptions.Writeback). The mount is noatime: reads never change a
// Workspace, so they never make a Commit necessary. With
// FUSE_HANDLE_KILLPRIV_V2 the daemon clears set-ID bits and
// security.capability itself (killpriv.go), on write, truncate and on a
// chown of any file but a directory, and the kernel asks for
// security.capability only before a file's first write (then it marks the
// inode S_NOSEC), not before every write. Features says which of these a
// mount got.
//
// Permission checks stay with the kernel (default_permissions). Without
// it the kernel checks no search permission on directories, and a path in
// its cache never reaches the daemon, so the daemon could not refuse it;
// the price is the parent's GETATTR after each create or remove (the
// kernel drops the directory's cached attributes, and checking the next
// permission fetches them again). A file created costs five requests:
// LOOKUP (the name is new), CREATE, GETXATTR(security.capability) at its
// first write, the parent's GETATTR at the next permission check, and
// RELEASE. Name components longer than 255 bytes fail with ENAMETOOLONG,
// as on the kernel's own filesystems: the kernel passes FUSE names up to
// 1024 bytes and leaves NAME_MAX to the daemon.
//
// # Daemon
//
// Serve runs one Workspace: it takes the Store's mount lock (flock on
// mount.lock, released by the kernel however the daemon dies, and recorded in
// mount.json), cleans up what a dead daemon left (its mount, control socket
// and overlay), mounts, and answers on a unix control socket (mode 0600,
// HTTP: GET /v1/stats, POST /v1/commit, POST /v1/unmount) until it is told to
// unmount or its context ends. Client asks a daemon over that socket. Unmount
// waits a bounded time for open files, then detaches the mount and aborts
// its FUSE connection, so it never hangs; it gives the Store back before it
// answers, so the Store can be mounted again at once.
//
// The kernel's requests reach the file system over FUSE over io_uring
// where the kernel grants it (layerfs/uring: a ring per CPU, each answered
// by a thread pinned to it, so a round trip stays on one CPU) and over
// /dev/fuse otherwise (MountOptions.Transport); Features.Transport says
// which, and TransportReason why not io_uring.
//
// # Telemetry
//
// Every FUSE request that reaches the file system (one kind per go-fuse
// RawFileSystem method; not INIT or INTERRUPT) is counted and timed by
// opcode: countingFS, whose methods fuseops_gen.go holds, generated from
// that interface by internal/gencounting. Beside them: copy-ups,
// whiteouts, SQL statements, Store and overlay bytes, and the durations of
// mount, Commit and unmount. Stats holds it all, served as GET /v1/stats.
//
// # Limits
//
// One FUSE inode can have only one passthrough backing file at a time, so a
// base file that some process holds open for reading cannot be copied up:
// opening it for writing waits up to a second for the readers to close, then
// fails with ETXTBSY. Copy-up clones the blob (FICLONE) where the overlay
// and the Store share a filesystem with reflinks (XFS, btrfs): instant,
// whatever the size. Elsewhere (ext4) it copies the whole file, except that
// a file of 1 MiB or more opened write-only without O_TRUNC is copied up
// lazily:
// its writes then go through the daemon, large ones done behind on another
// CPU (writebehind.go), and what was not written is filled in from the
// blob afterwards (lazycopy.go). Unmounting discards what was
// not committed, and a killed daemon's overlay is removed at the next mount.
// Extended attributes are kept in the Layer, not on the data files.
package layerfs
