package daemonapi

import (
	"fmt"
	"time"
)

// Exit codes of layerfsd. They are part of its API.
const (
	ExitOK         = 0 // success (a Commit that answers UpToDate included)
	ExitFailure    = 1 // anything not listed below
	ExitUsage      = 2 // bad flags or arguments
	ExitStore      = 3 // Store missing, damaged, not a LayerFS Store, or from a newer schema
	ExitBusy       = 4 // Store already mounted (the mount lock is held)
	ExitMountpt    = 5 // mount point is not an empty directory
	ExitNoAnswer   = 6 // control socket did not answer in time, or nobody listens
	ExitLayer      = 7 // Layer not found, or id prefix ambiguous
	ExitDaemonDied = 8 // the daemon exited before it was ready
)

// Error is what layerfsd prints with --json when a command fails. The
// decoders return it as the error when that is what they are given.
type Error struct {
	Message  string `json:"error"`
	ExitCode int    `json:"exitCode"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("layerfsd failed (exit %d): %s", e.ExitCode, e.Message)
}

// Profile says how hard a Store works to survive a crash.
type Profile string

const (
	// ProfileDurable survives power loss: WAL with synchronous=FULL, and
	// blobs are synced before the transaction that names them commits.
	ProfileDurable Profile = "durable"
	// ProfileFast survives the daemon being killed: WAL with
	// synchronous=NORMAL, blobs are not synced.
	ProfileFast Profile = "fast"
	// ProfileDisposable is for Stores thrown away after one run: WAL with
	// synchronous=OFF.
	ProfileDisposable Profile = "disposable"
)

// ParseProfile parses a profile name.
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(s); p {
	case ProfileDurable, ProfileFast, ProfileDisposable:
		return p, nil
	}
	return "", fmt.Errorf("unknown store profile %q (want durable, fast or disposable)", s)
}

// InitResult is what `layerfsd init --json` prints.
type InitResult struct {
	Store   string  `json:"store"`
	Profile Profile `json:"profile"`
	Schema  int     `json:"schema"`
}

// CheckResult is what `layerfsd check --json` prints: which check ran
// ("header", "quick_check" or "integrity_check", the most that ran), on
// how large a database (main file and WAL), how long it took, and, when
// the Store is damaged, which check found it and the problems it found.
type CheckResult struct {
	Store      string   `json:"store"`
	Check      string   `json:"check"`
	DBBytes    int64    `json:"dbBytes"`
	DurationNs int64    `json:"durationNs"`
	OK         bool     `json:"ok"`
	FoundBy    string   `json:"foundBy,omitempty"`
	Problems   []string `json:"problems"`
	// Blobs and BlobBytes say how many blobs, and bytes, were read and
	// compared with their digests (none with --quick); BadBlobs lists
	// the damaged and missing ones.
	Blobs     int       `json:"blobs"`
	BlobBytes int64     `json:"blobBytes"`
	BadBlobs  []BadBlob `json:"badBlobs,omitempty"`
}

// BadBlob is a blob that is missing, or whose content does not hash to
// its name, with every Layer and path it breaks.
type BadBlob struct {
	Digest  string   `json:"digest"`
	Problem string   `json:"problem"` // "missing", or "damaged: ..."
	Layers  []string `json:"layers"`
	Paths   []string `json:"paths"`
}

// Layer is a Layer as layerfsd prints it (import, show, log, and inside
// CommitResult). Ids are 64 lower-case hex digits.
type Layer struct {
	ID      string    `json:"id"`
	Parent  string    `json:"parent,omitempty"` // empty for a Layer without a parent
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
	Tree    string    `json:"tree"` // the root directory's tree object
}

// ChangeKind says how a path differs between two Layers.
type ChangeKind string

const (
	Added    ChangeKind = "A" // only in the second Layer
	Deleted  ChangeKind = "D" // only in the first Layer
	Modified ChangeKind = "M" // content, type or link target differs
	Metadata ChangeKind = "m" // only mode, owner, times, links or xattrs differ
)

// Change is one difference between two Layers (`layerfsd diff --json`
// prints a list of them).
type Change struct {
	Kind ChangeKind `json:"kind"`
	Path string     `json:"path"`
}

// Features says which kernel features a mount uses.
type Features struct {
	EntryTimeoutNs    int64 `json:"entryTimeoutNs"`
	AttrTimeoutNs     int64 `json:"attrTimeoutNs"`
	NegativeTimeoutNs int64 `json:"negativeTimeoutNs"`
	NegativeEntries   bool  `json:"negativeEntries"`
	WritebackCache    bool  `json:"writebackCache"`
	MaxWrite          int   `json:"maxWrite"`
	Passthrough       bool  `json:"passthrough"`
	ReaddirPlus       bool  `json:"readdirPlus"`
	ParallelDirops    bool  `json:"parallelDirops"`
	// KillPrivV2: the daemon clears set-ID bits and security.capability
	// on write, truncate and chown, and the kernel stops asking for
	// security.capability before every write.
	KillPrivV2     bool   `json:"killPrivV2"`
	KernelProtocol string `json:"kernelProtocol"`
	// Transport is how the kernel's requests reach the daemon: "uring"
	// (FUSE over io_uring, a ring per CPU) or "dev" (reads and writes of
	// /dev/fuse). TransportReason says why a mount that asked for
	// io_uring where it could get it (auto) is served over /dev/fuse.
	Transport       string `json:"transport"`
	TransportReason string `json:"transportReason,omitempty"`
	// Implementation is whose FUSE serves the mount: ImplLinux (the
	// kernel's) or ImplGVisor (gVisor's Sentry, which answers from a FUSE
	// of its own); empty in answers written before it was recorded.
	Implementation string `json:"implementation,omitempty"`
}

// FUSE implementations of Features.Implementation.
const (
	ImplLinux  = "linux"
	ImplGVisor = "gvisor"
)

// Transports of Features.Transport.
const (
	TransportURing = "uring"
	TransportDev   = "dev"
)

// QueueStats is one io_uring queue of a mount: the kernel puts a request on
// the queue of the CPU that made it.
type QueueStats struct {
	CPU int `json:"cpu"`
	// Pinned: the queue's thread was pinned to its CPU.
	Pinned   bool  `json:"pinned"`
	Requests int64 `json:"requests"`
}

// TransportStats counts the requests each transport carried.
type TransportStats struct {
	// Queues are the io_uring queues, one per possible CPU; none over
	// /dev/fuse.
	Queues []QueueStats `json:"queues,omitempty"`
	// RingRequests sums Queues; DevRequests came through /dev/fuse,
	// FORGETs aside (those always do, and are Forgets).
	RingRequests int64 `json:"ringRequests"`
	DevRequests  int64 `json:"devRequests"`
	Forgets      int64 `json:"forgets"`
}

// ReadyInfo is what a daemon says once its Workspace is mounted (`layerfsd
// mount --json`).
type ReadyInfo struct {
	PID        int      `json:"pid"`
	Store      string   `json:"store"`
	Workspace  string   `json:"workspace"`
	Control    string   `json:"control"`
	Layer      string   `json:"layer,omitempty"` // empty for an empty Store
	MountNs    int64    `json:"mountNs"`
	Features   Features `json:"features"`
	StaleFixed []string `json:"staleCleanedUp,omitempty"`
}

// OpStats is what telemetry says about one kind of FUSE request.
type OpStats struct {
	Count int64 `json:"count"`
	// TotalNs is the daemon's time spent in requests of this kind.
	TotalNs int64 `json:"totalNs"`
	// MedianNs is the median daemon time of one request (histogram
	// resolution: 250 ns below 64 µs).
	MedianNs int64 `json:"medianNs"`
}

// Usage is how much a Store holds.
type Usage struct {
	DBBytes   int64 `json:"dbBytes"`   // the bytes layerfs.db's rows hold (dbstat's payload; its WAL's included)
	BlobBytes int64 `json:"blobBytes"` // every blob the database names
	Blobs     int64 `json:"blobs"`
	Trees     int64 `json:"trees"`
	Layers    int64 `json:"layers"`
}

// Stats is the telemetry of a Workspace (`layerfsd stats --json`).
type Stats struct {
	Mountpoint string  `json:"mountpoint"`
	Store      string  `json:"store"`
	Profile    Profile `json:"profile"`
	Base       string  `json:"base"`
	// Requests counts FUSE requests by opcode name (CREATE, LOOKUP, ...);
	// only opcodes seen are listed.
	Requests map[string]OpStats `json:"requests"`
	// AllRequests sums Requests; its MedianNs is over every request.
	AllRequests   OpStats `json:"allRequests"`
	SQLStatements int64   `json:"sqlStatements"`
	StoreUsage    Usage   `json:"storeUsage"`
	OverlayBytes  int64   `json:"overlayBytes"`
	OverlayFiles  int64   `json:"overlayFiles"`
	CopyUps       int64   `json:"copyUps"`
	CopyUpBytes   int64   `json:"copyUpBytes"`
	LazyCopyUps   int64   `json:"lazyCopyUps"`
	// ClonedCopyUps shared the blob's extents (FICLONE, on filesystems
	// with reflinks) instead of copying its bytes.
	ClonedCopyUps int64 `json:"clonedCopyUps"`
	// WritesBehind are writes to a lazily copied-up file answered before
	// they reached its data file (see layerfs/lazycopy.go).
	WritesBehind int64    `json:"writesBehind"`
	Whiteouts    int64    `json:"whiteouts"`
	OpaqueDirs   int64    `json:"opaqueDirs"`
	Commits      int64    `json:"commits"`
	MountNs      int64    `json:"mountNs"`
	LastCommitNs int64    `json:"lastCommitNs"`
	UnmountNs    int64    `json:"unmountNs"`
	Features     Features `json:"features"`
	// TransportStats: which transport carried the requests (the
	// transport itself is Features.Transport).
	TransportStats TransportStats `json:"transportStats"`
	Workers        int            `json:"workers"`
}

// CommitResult is what a Commit did (`layerfsd commit --json`).
type CommitResult struct {
	// Layer is the new Layer, or the unchanged base when UpToDate.
	Layer    Layer `json:"layer"`
	UpToDate bool  `json:"upToDate"`
	// Hashed is how many files were hashed, HashedBytes their size.
	Hashed      int   `json:"hashed"`
	HashedBytes int64 `json:"hashedBytes"`
	// ReadBytes is how many of them hashing read: holes are skipped.
	ReadBytes int64 `json:"readBytes"`
	// DurationNs is the daemon's time for the whole Commit.
	DurationNs int64 `json:"durationNs"`
}

// UnmountResult is what an unmount did (`layerfsd unmount --json`).
type UnmountResult struct {
	// Lazy is set when files were still open after the bounded wait, so
	// the mount was detached (umount -l) and its connection aborted.
	Lazy bool `json:"lazy"`
	// DurationNs is the daemon's time to unmount; CleanupNs the time to
	// remove the overlay afterwards.
	DurationNs int64 `json:"durationNs"`
	CleanupNs  int64 `json:"cleanupNs"`
	// Cleared says what `layerfsd unmount` cleared of a daemon that had
	// died (its mount, socket, overlay); empty when the daemon answered.
	Cleared []string `json:"cleared,omitempty"`
}

// GCResult is what `layerfsd gc` removed: blob files and their bytes on
// disk (with the temporary files'), blob rows and trees no Layer
// references, and temporary files.
type GCResult struct {
	Store      string `json:"store"`
	Blobs      int    `json:"blobs"`
	BlobRows   int    `json:"blobRows"`
	Trees      int    `json:"trees"`
	TempFiles  int    `json:"tempFiles"`
	Bytes      int64  `json:"bytes"`
	DurationNs int64  `json:"durationNs"`
}
