//go:build linux

// Package layerfs is LayerFS: a layered workspace filesystem whose states are
// kept in a Store.
//
// # Store
//
// A Store is one directory holding a SQLite database (layerfs.db, opened with
// the pure-Go modernc.org/sqlite driver so binaries stay static) and
// content-addressed blobs (blobs/ab/abcdef..., named by the SHA-256 of their
// bytes, read-only once written). The database holds tree objects (one per
// directory, also content-addressed, so identical subtrees are stored once)
// and Layers. Three profiles set how hard the Store works to survive a crash:
// Durable (WAL, synchronous=FULL, blobs synced before the transaction that
// names them), Fast (WAL, NORMAL) and Disposable (WAL, OFF).
//
// # Layers
//
// A Layer is an immutable filesystem state: a root directory entry (mode,
// owner, times, root tree), a parent Layer, a message and a time. Its id is
// the SHA-256 of those fields. Files, directories, symlinks, device nodes,
// FIFOs, hard links, modes, owners, times, sizes and extended attributes are
// kept exactly.
//
// # Workspaces
//
// A Workspace is a FUSE mount of a Layer with a private writable overlay. The
// overlay keeps directory structure in memory (a directory's entries start as
// its base tree, loaded on first use; a deleted base entry becomes a whiteout,
// a directory that replaces a base one is opaque) and file data in a plain
// directory on the Store's disk, named by inode number, so that the kernel can
// serve file data by FUSE passthrough. Base files are served straight from
// their blobs; the first write copies a file up. Commit turns the overlay into
// a new Layer in one transaction, or answers UpToDate.
package layerfs

// # Kernel features
//
// A Workspace asks the kernel for long entry, attribute and negative-entry
// timeouts (every change goes through the daemon, so the caches never go
// stale), READDIRPLUS, 1 MiB MaxWrite and FUSE passthrough: the kernel then
// reads and writes file data straight from the blob or the upper data file,
// and READ and WRITE never reach the daemon. The kernel does not grant
// passthrough together with the writeback cache, so the writeback cache is
// off unless asked for (MountOptions.Writeback). The mount is noatime: reads
// never change a Workspace, so they never make a Commit necessary. With
// FUSE_HANDLE_KILLPRIV_V2 the daemon clears set-ID bits and
// security.capability itself (killpriv.go), and the kernel stops asking for
// security.capability before every write to a file.
//
// # Limits
//
// One FUSE inode can have only one passthrough backing file at a time, so a
// base file that some process holds open for reading cannot be copied up:
// opening it for writing waits up to a second for the readers to close, then
// fails with ETXTBSY. Copy-up clones the blob (FICLONE) where the Store's
// filesystem shares extents (XFS with reflinks, btrfs): instant, whatever
// the size. Elsewhere (ext4) it copies the whole file, except that a large
// file opened write-only is copied up lazily: its writes then go through
// the daemon, and what was not written is filled in from the blob
// afterwards (lazycopy.go). The overlay
// of a Workspace lives as long as its mount: unmounting discards what was not
// committed, and a killed daemon's overlay is removed at the next mount.
// Extended attributes are kept in the Layer, not on the data files.
