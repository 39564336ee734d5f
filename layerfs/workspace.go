//go:build linux

package layerfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
	"github.com/sealbench/sealbench/layerfs/uring"
)

// MountOptions are the options of Mount.
type MountOptions struct {
	// Layer is the base Layer. Nil means the Store's newest Layer, or an
	// empty directory for a Store without Layers.
	Layer *Layer
	// CacheTimeout is how long the kernel may trust entries, attributes
	// and negative lookups. Every change goes through this daemon, so the
	// caches never go stale; 0 means one hour.
	CacheTimeout time.Duration
	// NoPassthrough turns FUSE passthrough off: file data then flows
	// through the daemon.
	NoPassthrough bool
	// Writeback asks for the kernel's writeback cache. The kernel does
	// not grant passthrough together with it, so it is off by default.
	Writeback bool
	// OverlayDir is where the overlay's data files live (in a fresh
	// subdirectory); empty means the Store's own overlay directory, on
	// the Store's disk, where Commit moves a data file into the blobs by
	// rename. A tmpfs here trades memory for faster creates; the overlay
	// is discarded at unmount either way, so nothing is lost that a disk
	// would have kept.
	OverlayDir string
	// Workers is the number of hashing workers Commit uses; 0 means
	// Workers().
	Workers int
	// Transport is how FUSE requests reach the daemon: uring.Auto (the
	// default: io_uring where the kernel grants it, /dev/fuse otherwise,
	// and Features.TransportReason says why), uring.URing (io_uring or
	// an error) or uring.Dev (/dev/fuse).
	Transport uring.Transport
	// NoVerify turns off checking each blob against its digest on its
	// first open (verify.go): for measuring what the check costs.
	NoVerify bool
	Debug    bool
	Logger   *log.Logger
}

// Features says which kernel features a mount uses.
type Features = daemonapi.Features

// Workspace is a mounted Layer with a private writable overlay.
type Workspace struct {
	store      *Store
	mountpoint string
	upperDir   string
	server     *uring.Server
	logger     *log.Logger
	workers    int
	features   Features
	// flushErrno is what FLUSH answers (flushErrno).
	flushErrno syscall.Errno
	tel        telemetry

	euid, egid uint32 // who creates the data files
	umask      uint32 // this process's umask, applied to every data file created

	mu      wsMutex // guards everything below and every inode; Lock waits for the writes behind
	wb      *writeBehind
	base    *Layer
	root    *inode
	nextIno uint64
	links   map[uint64]*inode
	reap    chan string   // data files to remove (see maybeDropData)
	reaped  chan struct{} // closed when the reaper is done
	// releasing holds handles whose RELEASE go-fuse is still finishing,
	// keyed by the request's cancel channel.
	releasing map[<-chan struct{}]*handle
	// noClone: FICLONE from a blob into the overlay failed as unsupported
	// once, so copy-ups copy without trying it again.
	noClone bool

	mountDur   time.Duration
	commitDur  time.Duration
	commits    int64
	unmountDur time.Duration
	closed     bool

	causesMu sync.Mutex
	causes   map[string]int  // errors answered to the kernel, by cause (see failed)
	badBlobs map[Digest]bool // blobs found bad and logged (see badBlob)

	noVerify bool // MountOptions.NoVerify
}

func (ws *Workspace) logf(format string, args ...any) {
	if ws.logger != nil {
		ws.logger.Printf(format, args...)
	}
}

// errno is the errno that answers the kernel for err; an EIO, which says
// nothing of its cause to whoever gets it, is logged once per cause.
func (ws *Workspace) errno(err error) syscall.Errno {
	e := errno(err)
	if e == syscall.EIO {
		ws.logCause(e, err)
	}
	return e
}

// failed is errno for errors worth a line in the log whatever errno they
// become (a copy-up or an open of a blob that failed): once per cause.
func (ws *Workspace) failed(err error) syscall.Errno {
	e := errno(err)
	if e != 0 {
		ws.logCause(e, err)
	}
	return e
}

// logCause logs err the first time its cause (the innermost error's text)
// is answered, and counts the others; Unmount logs the counts. A damaged
// Store fails every access the same way: one line says why, not
// thousands.
func (ws *Workspace) logCause(e syscall.Errno, err error) {
	cause := err
	for u := errors.Unwrap(cause); u != nil; u = errors.Unwrap(cause) {
		cause = u
	}
	key := unix.ErrnoName(e) + ": " + cause.Error()
	ws.causesMu.Lock()
	if ws.causes == nil {
		ws.causes = map[string]int{}
	}
	n := ws.causes[key]
	ws.causes[key] = n + 1
	ws.causesMu.Unlock()
	if n == 0 {
		ws.logf("answered the kernel %s: %v (logged once per cause; unmount logs how often)", unix.ErrnoName(e), err)
	}
}

// logCauseCounts logs how often each logged cause was answered.
func (ws *Workspace) logCauseCounts() {
	ws.causesMu.Lock()
	defer ws.causesMu.Unlock()
	keys := make([]string, 0, len(ws.causes))
	for k := range ws.causes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ws.logf("answered the kernel %d times: %s", ws.causes[k], k)
	}
}

// Mountpoint returns where the Workspace is mounted.
func (ws *Workspace) Mountpoint() string { return ws.mountpoint }

// Base returns the Layer the Workspace shows under its overlay.
func (ws *Workspace) Base() *Layer {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.base
}

// ErrBadMountpoint says a mount point is not an empty directory.
var ErrBadMountpoint = errors.New("mount point must be an empty directory")

// CheckMountpoint says whether dir can be a Workspace's mount point: an
// existing, empty directory where nothing is mounted (ErrBadMountpoint).
// A dead daemon's mount passes: the next daemon unmounts it, under the
// Store's lock, before it checks again.
func CheckMountpoint(dir string) error {
	if err := checkMountpoint(dir); err != nil && !isDeadMount(err) {
		return err
	}
	return nil
}

// checkMountpoint insists on an existing, empty directory.
func checkMountpoint(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("checking mount point %q: %w: %w", dir, ErrBadMountpoint, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("checking mount point %q: %w (not a directory)", dir, ErrBadMountpoint)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checking mount point %q: %w: %w", dir, ErrBadMountpoint, err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("checking mount point %q: %w (it is not empty)", dir, ErrBadMountpoint)
	}
	if isMountpoint(dir) {
		return fmt.Errorf("checking mount point %q: %w (something is mounted there)", dir, ErrBadMountpoint)
	}
	return nil
}

// Mount mounts a Workspace of a Layer of s at mountpoint, an empty
// directory. The caller must Unmount it.
func Mount(ctx context.Context, s *Store, mountpoint string, opts MountOptions) (*Workspace, error) {
	t0 := time.Now()
	mountpoint, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mounting workspace at %q: %w", mountpoint, err)
	}
	if err := checkMountpoint(mountpoint); err != nil {
		return nil, err
	}
	base := opts.Layer
	if base == nil {
		if base, err = s.Head(ctx); err != nil {
			return nil, err
		}
	}
	if base == nil {
		base = &Layer{Root: emptyRoot()}
	}
	overlayParent := opts.OverlayDir
	if overlayParent == "" {
		overlayParent = filepath.Join(s.dir, overlaysDir)
	}
	upper, err := os.MkdirTemp(overlayParent, "layerfs-ws-")
	if err != nil {
		return nil, fmt.Errorf("mounting workspace at %q: creating overlay: %w", mountpoint, err)
	}
	ws := &Workspace{store: s, mountpoint: mountpoint, upperDir: upper, logger: opts.Logger,
		workers: opts.Workers, base: base, links: map[uint64]*inode{}, noVerify: opts.NoVerify,
		releasing: map[<-chan struct{}]*handle{},
		reap:      make(chan string, 4096), reaped: make(chan struct{})}
	ws.wb = newWriteBehind()
	ws.mu.wb = ws.wb
	go ws.reaper()
	defer func() {
		if ws.server == nil { // the mount failed
			close(ws.reap)
			ws.wb.stop()
		}
	}()
	if ws.workers <= 0 {
		ws.workers = Workers()
	}
	ws.euid, ws.egid = uint32(os.Geteuid()), uint32(os.Getegid())
	um := unix.Umask(0o22)
	unix.Umask(um)
	ws.umask = uint32(um)
	root := base.Root
	ws.root = ws.inodeFromEntry(nil, &root)
	if err := ws.loadLinks(ctx, base); err != nil {
		os.RemoveAll(upper)
		return nil, fmt.Errorf("mounting workspace at %q: %w", mountpoint, err)
	}

	impl := fuseImplementation()
	ws.flushErrno = flushErrno(impl)
	fopts, timeout := kernelOptions(opts)
	if impl == daemonapi.ImplGVisor {
		// gVisor's FUSE takes a LOOKUP answered with node 0 for a new
		// inode and fails it with EIO, where Linux caches a negative
		// entry: it gets ENOENT.
		fopts.NegativeTimeout = nil
	}
	fopts.RootStableAttr = &fs.StableAttr{Ino: ws.root.ino, Gen: 1}
	raw := fs.NewNodeFS(&node{ws: ws, in: ws.root}, fopts)
	counted := &countingFS{RawFileSystem: &afterRelease{RawFileSystem: raw, done: ws.releaseDone}, t: &ws.tel}
	server, err := uring.Mount(mountpoint, counted, &fopts.MountOptions, uring.Options{Transport: opts.Transport})
	if err != nil {
		os.RemoveAll(upper)
		return nil, fmt.Errorf("mounting workspace at %q: %w", mountpoint, err)
	}
	ws.server = server
	ks := server.Fuse().KernelSettings()
	flags := ks.Flags64()
	granted := flags &^ fopts.DisabledCapabilities
	ws.features = Features{
		EntryTimeoutNs:    int64(timeout),
		AttrTimeoutNs:     int64(timeout),
		NegativeTimeoutNs: int64(timeout),
		NegativeEntries:   fopts.NegativeTimeout != nil,
		WritebackCache:    opts.Writeback && granted&fuse.CAP_WRITEBACK_CACHE != 0,
		MaxWrite:          fopts.MaxWrite,
		// The kernel does not enable passthrough on a connection with
		// the writeback cache (checked: READs then reach the daemon).
		Passthrough:    granted&fuse.CAP_PASSTHROUGH != 0 && os.Geteuid() == 0 && !opts.Writeback,
		ReaddirPlus:    granted&fuse.CAP_READDIRPLUS != 0,
		ParallelDirops: granted&fuse.CAP_PARALLEL_DIROPS != 0,
		KillPrivV2:     granted&fuse.CAP_HANDLE_KILLPRIV_V2 != 0,
		KernelProtocol: fmt.Sprintf("%d.%d", ks.Major, ks.Minor),
		Transport:      string(server.Transport()),
		Implementation: impl,
	}
	if why := server.Reason(); why != nil {
		ws.features.TransportReason = why.Error()
	}
	ws.mountDur = time.Since(t0)
	return ws, nil
}

// fuseImplementation says whose FUSE the daemon runs under: gVisor's
// Sentry calls its kernel release "4.19.0-gvisor" (or the like), and
// serves /dev/fuse itself; anything else is Linux.
func fuseImplementation() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil && strings.Contains(unix.ByteSliceToString(u.Release[:]), "gvisor") {
		return daemonapi.ImplGVisor
	}
	return daemonapi.ImplLinux
}

// flushErrno is what FLUSH answers under impl. The data files are local,
// so a flush has nothing to do: Linux takes ENOSYS as "send no more",
// one FUSE round trip per close(2) saved; gVisor hands the ENOSYS on to
// close(2), so there it is 0.
func flushErrno(impl string) syscall.Errno {
	if impl == daemonapi.ImplGVisor {
		return 0
	}
	return syscall.ENOSYS
}

// kernelOptions are the FUSE settings of a Workspace mount, and the cache
// timeout in them. The benchmarks mount go-fuse's loopback with the same.
func kernelOptions(opts MountOptions) (*fs.Options, time.Duration) {
	timeout := opts.CacheTimeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	fopts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:       "layerfs",
			Name:         "layerfs",
			MaxWrite:     1 << 20,
			MaxReadAhead: 1 << 20,
			DirectMount:  true,
			// noatime: reads must not change the Workspace.
			DirectMountFlags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOATIME,
			// Locks go to the data files (open file description locks),
			// as go-fuse's loopback does.
			EnableLocks: true,
			Options:     []string{"default_permissions"},
			// The blobs and data files passthrough serves from may lie on
			// a stacked filesystem themselves: a container's overlayfs
			// root has depth 1, and at go-fuse's default of 1 the kernel
			// refuses them (ELOOP), so reads quietly went through the
			// daemon in every Sandbox. 2 is the kernel's maximum; it
			// means nothing can stack on a Workspace, which nothing does.
			MaxStackDepth: 2,
			Debug:         opts.Debug,
			Logger:        opts.Logger,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
		Logger:          opts.Logger,
	}
	if os.Geteuid() == 0 {
		fopts.AllowOther = true
	}
	if opts.NoPassthrough {
		fopts.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	if opts.Writeback {
		fopts.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	// The daemon clears set-ID bits and capabilities itself (killpriv.go),
	// so the kernel stops asking for security.capability before writes.
	fopts.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
	return fopts, timeout
}

// loadLinks loads every directory that holds a name of a hard-linked inode,
// so that all names of one inode share it from the start, and no directory
// left unloaded (and reused by digest at Commit) holds a link.
func (ws *Workspace) loadLinks(ctx context.Context, l *Layer) error {
	for _, group := range l.links {
		for _, p := range group {
			dir := ws.root
			parts := strings.Split(strings.Trim(p, "/"), "/")
			for _, name := range parts[:len(parts)-1] {
				if e := ws.loadDir(ctx, dir); e != 0 {
					return fmt.Errorf("loading hard link %q: %w", p, e)
				}
				next, ok := dir.children[name]
				if !ok || !next.isDir() {
					return fmt.Errorf("loading hard link %q: %q missing in layer %s", p, name, l.ID.Short())
				}
				dir = next
			}
			if e := ws.loadDir(ctx, dir); e != 0 {
				return fmt.Errorf("loading hard link %q: %w", p, e)
			}
		}
	}
	return nil
}

// CommitResult is what Commit did. The daemon sends its Info.
type CommitResult struct {
	// Layer is the new Layer, or the unchanged base when UpToDate.
	Layer    *Layer
	UpToDate bool
	// Hashed is how many files were hashed, HashedBytes their size.
	Hashed      int
	HashedBytes int64
	// ReadBytes is how many bytes hashing read: holes are not read.
	ReadBytes int64
	// DurationNs is the daemon's time for the whole Commit.
	DurationNs int64
}

// Info is the result as layerfsd prints it.
func (r *CommitResult) Info() daemonapi.CommitResult {
	return daemonapi.CommitResult{Layer: r.Layer.Info(), UpToDate: r.UpToDate,
		Hashed: r.Hashed, HashedBytes: r.HashedBytes, ReadBytes: r.ReadBytes, DurationNs: r.DurationNs}
}

// commitFile is one upper data file a Commit stores.
type commitFile struct {
	in     *inode
	open   bool   // has open handles: hash a private copy
	tmp    string // the private copy
	digest Digest
	size   int64
	stamp  [3]int64
	cached bool
}

// Commit turns the Workspace's changes into a new Layer whose parent is the
// base, in one transaction, and makes it the base. When nothing changed it
// answers UpToDate and writes nothing.
func (ws *Workspace) Commit(ctx context.Context, message string) (*CommitResult, error) {
	t0 := time.Now()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil, errors.New("committing workspace: it is unmounted")
	}
	lock, err := ws.store.lockGC(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("committing workspace: %w", err)
	}
	defer lock.unlock()
	c := &commit{ws: ws, ctx: ctx, lock: lock}
	// A failed or stopped Commit leaves the Store and the Workspace as
	// they were: its temporary copies and the blobs it created go, the
	// data files it moved into the blobs come back.
	fail := func(err error) (*CommitResult, error) {
		c.removeTemps()
		if why := c.rollback(); why != "" {
			err = fmt.Errorf("%w; %s", err, why)
		}
		return nil, fmt.Errorf("committing workspace: %w", err)
	}
	if err := c.collect(); err != nil {
		return fail(err)
	}
	if err := c.hash(); err != nil {
		return fail(err)
	}
	res := &CommitResult{}
	res.Hashed, res.HashedBytes = c.hashed()
	res.ReadBytes = c.readBytes.Load()
	c.buildTrees()
	if c.unchanged() {
		c.removeTemps()
		res.Layer, res.UpToDate = ws.base, true
	} else {
		if err := c.installBlobs(); err != nil {
			return fail(err)
		}
		l, err := c.writeLayer(ctx, message)
		if err != nil {
			return fail(err)
		}
		ws.store.stampWritten(ctx, c.written())
		c.afterWrite()
		c.adopt(l)
		res.Layer = l
	}
	res.DurationNs = int64(time.Since(t0))
	ws.commitDur = time.Duration(res.DurationNs)
	return res, nil
}

// commit is one Commit under way, its steps in the order Commit runs them.
// The Workspace's lock is held throughout: the tree cannot change under it.
type commit struct {
	ws   *Workspace
	ctx  context.Context
	lock *storeLock // gc.lock, shared
	// What installBlobs did, for rollback or afterWrite: blobs it made
	// from copies, data files it moved into the blobs, and data files to
	// remove (and serve from their blobs) once the Layer is written.
	created []Digest
	moved   []movedFile
	later   []*commitFile
	// readBytes counts the bytes hashing read: holes are not read.
	readBytes atomic.Int64
	files     []*commitFile
	sums      map[*inode]*commitFile // files by inode, once hashed
	// What buildTrees makes: the new Layer's root entry, its trees and
	// blobs, its hard-link groups, and the tree each loaded directory got.
	nl       *newLayer
	root     Entry
	links    [][]string
	dirTrees map[*inode]Digest
}

// collect lists every upper data file, once per inode, and brings each up
// to date first: a lazy copy-up is finished, so the file holds all its
// bytes, and its size and times are read again, so the stamp that decides
// whether an earlier sum still holds is current.
func (c *commit) collect() error {
	seen := map[*inode]bool{}
	var walk func(dir *inode)
	walk = func(dir *inode) {
		for _, in := range dir.children {
			if in.isDir() {
				if in.children != nil {
					walk(in)
				}
				continue
			}
			if in.upper && !seen[in] {
				seen[in] = true
				c.files = append(c.files, &commitFile{in: in, open: in.upperOpens > 0})
			}
		}
	}
	if c.ws.root.children != nil {
		walk(c.ws.root)
	}
	for _, f := range c.files {
		if e := c.ws.finishLazy(f.in); e != 0 {
			return fmt.Errorf("finishing copy-up of inode %d: %w", f.in.ino, e)
		}
		if e := c.ws.refreshUpper(f.in); e != 0 {
			return fmt.Errorf("reading data of inode %d: %w", f.in.ino, e)
		}
		f.stamp = [3]int64{f.in.ctime, f.in.mtime, f.in.size}
		if f.in.sumStamp == f.stamp && !f.in.sum.IsZero() {
			f.digest, f.size, f.cached = f.in.sum, f.in.size, true
		}
	}
	return nil
}

// hash hashes the files whose sum is not cached, in parallel: hashing is
// most of a Commit's time. A file someone has open may change while we read
// it, so a private copy of it is hashed instead (and later installed).
func (c *commit) hash() error {
	err := parallel(len(c.files), c.ws.workers, func(i int) error {
		f := c.files[i]
		if f.cached {
			return nil
		}
		src := c.ws.upperPath(f.in)
		if f.open {
			tmp, err := c.ws.store.copyToTemp(c.ctx, src)
			if err != nil {
				return err
			}
			f.tmp, src = tmp, tmp
		}
		d, n, read, err := c.ws.store.digestFile(c.ctx, src)
		c.readBytes.Add(read)
		if err != nil {
			return err
		}
		f.digest, f.size = d, n
		return nil
	})
	if err != nil {
		return err
	}
	c.sums = make(map[*inode]*commitFile, len(c.files))
	for _, f := range c.files {
		c.sums[f.in] = f
	}
	return nil
}

// hashed counts the files hash read, and their bytes, for the result.
func (c *commit) hashed() (n int, size int64) {
	for _, f := range c.files {
		if !f.cached {
			n++
			size += f.size
		}
	}
	return n, size
}

// buildTrees encodes the tree objects bottom up. Directories never loaded
// keep their base tree: nothing below them changed, and not reading them is
// what keeps a Commit proportional to the changes. Hard-link groups are
// numbered in path order, so the same tree gives the same Layer.
func (c *commit) buildTrees() {
	c.nl = &newLayer{blobs: map[Digest]int64{}, trees: map[Digest][]byte{}}
	c.dirTrees = map[*inode]Digest{}
	linkIDs := map[*inode]uint64{}
	var build func(dir *inode, path string) Digest
	build = func(dir *inode, path string) Digest {
		if dir.children == nil {
			return dir.tree
		}
		names := make([]string, 0, len(dir.children))
		for name := range dir.children {
			names = append(names, name)
		}
		sort.Strings(names)
		entries := make([]Entry, 0, len(names))
		for _, name := range names {
			in := dir.children[name]
			p := path + "/" + name
			e := in.entry(name)
			switch {
			case in.isDir():
				e.Content = build(in, p)
			case in.isRegular():
				if f, ok := c.sums[in]; ok {
					e.Content, e.Size = f.digest, f.size
					c.nl.blobs[f.digest] = f.size
				} else {
					e.Content = in.blob
				}
			}
			if !in.isDir() && in.nlink > 1 {
				id, ok := linkIDs[in]
				if !ok {
					c.links = append(c.links, nil)
					id = uint64(len(c.links))
					linkIDs[in] = id
				}
				c.links[id-1] = append(c.links[id-1], p)
				e.LinkID = id
			}
			entries = append(entries, e)
		}
		data, d := encodeTree(entries)
		c.nl.trees[d] = data
		c.dirTrees[dir] = d
		return d
	}
	c.root = c.ws.root.entry("")
	c.root.Content = build(c.ws.root, "")
}

// unchanged reports whether the new root is the base's, hard-link groups
// included: then the Commit is UpToDate and writes nothing, so committing
// twice never makes an empty Layer.
func (c *commit) unchanged() bool {
	base := c.ws.base.Root
	return string(encodeEntry(&c.root)) == string(encodeEntry(&base)) && len(c.links) == len(c.ws.base.links)
}

// movedFile is a data file installBlobs moved into the blobs by rename.
type movedFile struct {
	f    *commitFile
	blob Digest // the inode's blob before
}

// installBlobs stores each file's data as its blob before the transaction
// that names it. A closed data file becomes the blob itself (a rename, no
// copy) and its inode is served from the blob from now on; an open one
// stays upper and its private copy becomes the blob. A data file whose
// blob already exists, or that had to be copied (the overlay on another
// filesystem), is removed only once the Layer is written (afterWrite).
func (c *commit) installBlobs() error {
	ws := c.ws
	for _, f := range c.files {
		if f.cached && !f.in.upper {
			continue
		}
		if err := c.ctx.Err(); err != nil {
			return err
		}
		var err error
		switch {
		case f.tmp != "":
			err = c.install(f.tmp, f.digest)
			f.tmp = ""
		case f.cached || !f.open && blobExists(ws.store, f.digest):
			if !blobExists(ws.store, f.digest) {
				// The blob was never installed (an earlier Commit
				// failed); install it from a copy.
				var tmp string
				if tmp, err = ws.store.copyToTemp(c.ctx, ws.upperPath(f.in)); err == nil {
					err = c.install(tmp, f.digest)
				}
			}
			if err == nil && !f.open {
				// Served from the blob once the Layer is written.
				c.later = append(c.later, f)
			}
		case !f.open:
			var created bool
			created, err = ws.store.installBlob(ws.upperPath(f.in), f.digest)
			if errors.Is(err, syscall.EXDEV) {
				// The overlay is on another filesystem: copy.
				var tmp string
				if tmp, err = ws.store.copyToTemp(c.ctx, ws.upperPath(f.in)); err == nil {
					if err = c.install(tmp, f.digest); err == nil {
						c.later = append(c.later, f)
					}
				}
			} else if err == nil {
				if created {
					c.moved = append(c.moved, movedFile{f, f.in.blob})
				}
				f.in.upper = false
				f.in.blob = f.digest
			}
		}
		if err != nil {
			return err
		}
		if f.in.upper {
			f.in.sum, f.in.sumStamp = f.digest, f.stamp
		}
	}
	return nil
}

// install installs a temporary copy as the blob d, remembering it if it
// is new.
func (c *commit) install(tmp string, d Digest) error {
	created, err := c.ws.store.installBlob(tmp, d)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if created {
		c.created = append(c.created, d)
	}
	return nil
}

func blobExists(s *Store, d Digest) bool {
	_, err := os.Lstat(s.blobPath(d))
	return err == nil
}

// written is the blobs this Commit put in the Store: the copies it
// installed and the data files it moved, each holding the bytes it hashed.
func (c *commit) written() []Digest {
	out := append([]Digest(nil), c.created...)
	for _, m := range c.moved {
		out = append(out, m.f.digest)
	}
	return out
}

// afterWrite removes the data files whose content is now a blob of the
// written Layer: their inodes are served from the blobs.
func (c *commit) afterWrite() {
	for _, f := range c.later {
		if err := os.Remove(c.ws.upperPath(f.in)); err != nil {
			c.ws.logf("commit: keeping data file of inode %d: %v", f.in.ino, err)
			continue
		}
		f.in.upper = false
		f.in.blob = f.digest
	}
	c.later, c.moved, c.created = nil, nil, nil
}

// rollback undoes installBlobs after a failure: the data files it moved
// come back (the Workspace must not lose them), and the blobs it created
// go, when no other writer runs (see gc.go). It returns a sentence for
// the error, or "".
func (c *commit) rollback() string {
	if len(c.moved) == 0 && len(c.created) == 0 {
		return ""
	}
	ws := c.ws
	exclusive := c.lock.tryExclusive()
	var errs []error
	for _, m := range c.moved {
		in, p := m.f.in, ws.upperPath(m.f.in)
		if exclusive {
			err := os.Rename(ws.store.blobPath(m.f.digest), p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
		} else if err := copyBack(ws.store.blobPath(m.f.digest), p, in); err != nil {
			// Another writer may have taken the blob for a duplicate
			// of its own: it stays, and the data file comes back as a
			// copy, so gc can never take the Workspace's data.
			errs = append(errs, err)
			continue
		}
		if err := unix.Chmod(p, in.mode&07777); err != nil {
			errs = append(errs, err)
		}
		in.upper, in.blob = true, m.blob
	}
	if exclusive {
		if _, err := ws.store.removeCreated(c.created); err != nil {
			errs = append(errs, err)
		}
	}
	n := len(c.moved) + len(c.created)
	c.moved, c.created = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Sprintf("could not undo all it wrote (%v); `layerfsd gc` removes what is left", err)
	}
	if !exclusive {
		return fmt.Sprintf("left %d blobs it wrote for `layerfsd gc` (another commit or import is running)", n)
	}
	return ""
}

// copyBack copies the blob at src to a new data file of in at dst, holes
// kept, with in's owner and times (its mode is the caller's).
func copyBack(src, dst string, in *inode) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = copyFileSparse(context.Background(), f, out)
	if err == nil {
		err = out.Chown(int(in.uid), int(in.gid))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{unix.NsecToTimespec(in.atime), unix.NsecToTimespec(in.mtime)}, 0)
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// writeLayer writes the Layer, its trees and its blobs' rows in one
// transaction, so a crash leaves either the whole Layer or none of it.
func (c *commit) writeLayer(ctx context.Context, message string) (*Layer, error) {
	l := &Layer{Parent: c.ws.base.ID, Message: message, Time: time.Now(), Root: c.root, links: c.links}
	l.ID = layerID(l.Parent, &l.Root, l.Message, l.Time)
	c.nl.layer = l
	if err := c.ws.store.writeLayer(ctx, c.nl); err != nil {
		return nil, err
	}
	return l, nil
}

// adopt makes the written Layer the Workspace's base: each loaded directory
// now is its new tree, with no whiteouts and not opaque, and its entries are
// the base entries of the next Commit.
func (c *commit) adopt(l *Layer) {
	for dir, d := range c.dirTrees {
		dir.tree = d
		dir.whiteouts = nil
		dir.opaque = false
		for name, in := range dir.children {
			in.baseParent, in.baseName = dir, name
		}
	}
	c.ws.base = l
	c.ws.commits++
}

// removeTemps removes the private copies that were not installed as blobs
// (after a failure, or when the Commit is UpToDate).
func (c *commit) removeTemps() {
	for _, f := range c.files {
		if f.tmp != "" {
			os.Remove(f.tmp)
			f.tmp = ""
		}
	}
}

// UnmountResult is what Unmount did.
type UnmountResult = daemonapi.UnmountResult

// Unmount unmounts the Workspace and discards its overlay (changes not
// committed are lost). If the mount stays busy past wait, it is detached
// lazily and its FUSE connection aborted, so Unmount never hangs.
func (ws *Workspace) Unmount(wait time.Duration) (*UnmountResult, error) {
	t0 := time.Now()
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, errors.New("unmounting workspace: already unmounted")
	}
	ws.closed = true
	ws.mu.Unlock()
	res := &UnmountResult{}
	var st unix.Stat_t
	statErr := unix.Stat(ws.mountpoint, &st)
	deadline := t0.Add(wait)
	delay := time.Millisecond
	var err error
	for {
		err = unmount(ws.mountpoint, 0)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
	if err != nil {
		res.Lazy = true
		if derr := unmount(ws.mountpoint, unix.MNT_DETACH); derr != nil {
			return nil, fmt.Errorf("unmounting %q: %v; lazy unmount: %w", ws.mountpoint, err, derr)
		}
		if statErr == nil {
			abortConnection(unix.Minor(st.Dev))
		}
	}
	done := make(chan struct{})
	go func() { ws.server.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait + time.Second):
		ws.logf("unmount of %q: serve loops still running; leaving them", ws.mountpoint)
	}
	res.DurationNs = int64(time.Since(t0))
	t1 := time.Now()
	ws.wb.stop()
	close(ws.reap)
	<-ws.reaped
	os.RemoveAll(ws.upperDir)
	res.CleanupNs = int64(time.Since(t1))
	ws.mu.Lock()
	ws.unmountDur = time.Duration(res.DurationNs)
	ws.mu.Unlock()
	ws.logCauseCounts()
	return res, nil
}

// unmount unmounts a FUSE mount: umount(2) when root, fusermount3 otherwise.
func unmount(dir string, flags int) error {
	if os.Geteuid() == 0 {
		return unix.Unmount(dir, flags)
	}
	args := []string{"-u", dir}
	if flags&unix.MNT_DETACH != 0 {
		args = []string{"-u", "-z", dir}
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if p, err := execLookPath(bin); err == nil {
			if out, err := execCommand(p, args...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, out)
			}
			return nil
		}
	}
	return errors.New("unmounting: fusermount3 not found")
}

// abortConnection aborts a FUSE connection through fusectl, so that files
// still open on a lazily unmounted Workspace fail instead of hanging.
func abortConnection(minor uint32) {
	const ctl = "/sys/fs/fuse/connections"
	p := filepath.Join(ctl, strconv.FormatUint(uint64(minor), 10), "abort")
	if _, err := os.Stat(p); err != nil && os.Geteuid() == 0 {
		unix.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
		io.WriteString(f, "1")
		f.Close()
	}
}

// Stats is the telemetry of a Workspace.
type Stats = daemonapi.Stats

// overlayUsage counts the data files of the regular files the Workspace
// shows, and their bytes. It does not list the overlay directory: the data
// of an unlinked file goes in the background (the reaper), or at its last
// RELEASE, which the kernel sends when it likes, so a listing made the
// count depend on timing and the same work gave different counts.
func (ws *Workspace) overlayUsage() (files int64, bytes int64) {
	ws.mu.Lock()
	var paths []string
	seen := map[uint64]bool{}
	var walk func(d *inode)
	walk = func(d *inode) {
		for _, c := range d.children { // nil for a directory never loaded: nothing below it changed
			switch {
			case c.isDir():
				walk(c)
			case c.isRegular() && c.upper && c.nlink > 0 && !seen[c.ino]:
				seen[c.ino] = true
				paths = append(paths, ws.upperPath(c))
			}
		}
	}
	walk(ws.root)
	ws.mu.Unlock()
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			files++
			bytes += fi.Size()
		}
	}
	return files, bytes
}

// transportStats is the transport's figures as layerfsd prints them.
func transportStats(ts uring.Stats) daemonapi.TransportStats {
	out := daemonapi.TransportStats{RingRequests: ts.RingRequests, DevRequests: ts.DevRequests, Forgets: ts.Forgets}
	for _, q := range ts.Queues {
		out.Queues = append(out.Queues, daemonapi.QueueStats{CPU: q.CPU, Pinned: q.Pinned, Requests: q.Requests})
	}
	return out
}

// Stats returns the Workspace's telemetry.
func (ws *Workspace) Stats(ctx context.Context) (*Stats, error) {
	st := &Stats{Mountpoint: ws.mountpoint, Store: ws.store.dir, Profile: ws.store.profile,
		Features: ws.features, Workers: ws.workers}
	st.Requests, st.AllRequests = ws.tel.snapshot()
	u, err := ws.store.Usage(ctx)
	if err != nil {
		return nil, err
	}
	st.StoreUsage = u
	st.SQLStatements = ws.store.Statements()
	st.OverlayFiles, st.OverlayBytes = ws.overlayUsage()
	st.CopyUps = ws.tel.copyUps.Load()
	st.CopyUpBytes = ws.tel.copyUpBytes.Load()
	st.LazyCopyUps = ws.tel.lazyCopyUps.Load()
	st.ClonedCopyUps = ws.tel.clonedCopyUps.Load()
	st.WritesBehind = ws.tel.writesBehind.Load()
	st.Whiteouts = ws.tel.whiteouts.Load()
	st.TransportStats = transportStats(ws.server.Stats())
	st.OpaqueDirs = ws.tel.opaqueDirs.Load()
	ws.mu.Lock()
	if !ws.base.ID.IsZero() {
		st.Base = ws.base.ID.String()
	}
	st.Commits = ws.commits
	st.MountNs = int64(ws.mountDur)
	st.LastCommitNs = int64(ws.commitDur)
	st.UnmountNs = int64(ws.unmountDur)
	ws.mu.Unlock()
	return st, nil
}
