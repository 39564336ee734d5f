package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The results formats: a run directory holds PinsFile (one RunPins) and
// SamplesFile (one Sample per line, JSON Lines, appended as samples finish).
const (
	// ResultsFormatVersion is the version of both results formats that this
	// code writes and reads. Every sample line and the pins carry it.
	ResultsFormatVersion = 1
	// RunPinsKind is the pins file's "kind" field.
	RunPinsKind = "sealbench.pins"

	SamplesFile = "samples.jsonl"
	PinsFile    = "pins.json"

	// MaxSampleLine bounds one line of a samples file.
	MaxSampleLine = 1 << 20
	// MaxPinsSize bounds a pins file.
	MaxPinsSize = 1 << 20
)

// SampleStatus says whether a sample's cell ran and passed its verifier.
type SampleStatus string

// The sample statuses. A failed or ineligible sample is kept as such, never
// retried silently, and always says why in Reason.
const (
	StatusOK         SampleStatus = "ok"         // ran, and the verifier passed
	StatusFailed     SampleStatus = "failed"     // a step failed, or the verifier did
	StatusIneligible SampleStatus = "ineligible" // the target cannot run this cell
)

// Failed says whether s counts as a failure of the run: an ineligible
// sample (the target cannot run the cell, and Reason says why) does not.
func (s *Sample) Failed() bool { return s.Status != StatusOK && s.Status != StatusIneligible }

// VerifierResult is the outcome of a cell's verifier.
type VerifierResult string

// The verifier results.
const (
	VerifierPass   VerifierResult = "pass"
	VerifierFail   VerifierResult = "fail"
	VerifierNotRun VerifierResult = "notRun" // the cell did not get as far as verifying
)

// Engine kinds: what serves the Engine API on a target.
const (
	EngineDockerd = "dockerd"
	EngineStandin = "standin"
	// EngineKubernetes is sealbench's kube-engine: the Engine API in
	// front of a Kubernetes cluster, whose containers are pods.
	EngineKubernetes = "kubernetes"
)

// Store profiles (LayerFS SQLite settings).
const (
	StoreDurable    = "durable"    // WAL, synchronous=FULL
	StoreFast       = "fast"       // WAL, synchronous=NORMAL
	StoreDisposable = "disposable" // WAL, synchronous=OFF
)

// Sample is one timed execution of one cell on one target, with everything
// recorded about it. Durations are integer nanoseconds: CommandNs on the
// Sandbox's own clock, the others on the runner's.
type Sample struct {
	FormatVersion int    `json:"formatVersion"`
	RunID         string `json:"runId"`
	BundleID      string `json:"bundleId"` // build-linux-<hash12>
	Target        string `json:"target"`
	Cell          string `json:"cell"` // C01..C12, or a cell of another suite (T1)
	// Suite names the suite the cell is of; absent (results from before
	// suites, and the default suite's) is DefaultSuite.
	Suite string `json:"suite,omitempty"`
	Round int    `json:"round"` // 0..N-1: which of the N samples of this target and cell
	Order int    `json:"order"` // position in the run's interleaved order, from 0

	Status SampleStatus `json:"status"`
	// Reason says why, in one line, when Status is not ok: for an
	// ineligible sample, why the target cannot run the cell's LayerFS side
	// (whose timings it then lacks: CommandNs, ExecWallNs and
	// ExecOverheadNs are the native reference's, when one ran).
	Reason string `json:"reason,omitempty"`

	CommandNs      int64 `json:"commandNs"`      // the body's time on the Sandbox clock
	ExecWallNs     int64 `json:"execWallNs"`     // the exec call's wall time on the runner side
	ExecOverheadNs int64 `json:"execOverheadNs"` // ExecWallNs - CommandNs
	// ReadyNs is the time to a usable Sandbox, cold: from the runner's
	// create request to the end of the Sandbox's first successful exec
	// (`true`), through the Engine's create and start (a pod scheduled and
	// running, an agent-sandbox Sandbox Ready). Absent in samples written
	// before it was recorded, and in one whose Sandbox never answered.
	ReadyNs int64 `json:"readyNs,omitempty"`
	// ExitNs is the Sandbox's exit as the runner times it: its stop
	// request (its processes killed, the Sandbox stopped) until the Engine
	// answers; its removal waits for the end of the run (protocol 5), so
	// it is not in here. Where the Engine cannot stop a Sandbox
	// (kube-engine), it is the removal. Absent in samples written before
	// it was recorded.
	ExitNs int64 `json:"exitNs,omitempty"`
	// LaunchToExitNs is the cell as a whole task, for a cell that asks for
	// it (a suite's launchToExit): ReadyNs, the timed window's exec wall
	// time (ExecWallNs) and ExitNs, added. It leaves out what the protocol
	// does between the launch and the window, untimed (the bundle check,
	// the setup, the warm-ups), and is absent when any of the three is.
	LaunchToExitNs int64 `json:"launchToExitNs,omitempty"`
	MountNs        int64 `json:"mountNs"`
	UnmountNs      int64 `json:"unmountNs"`
	CommitNs       int64 `json:"commitNs"`
	// NativeNs is the same body's time on a plain directory in the same
	// Sandbox, with no LayerFS; present only when a native reference was asked for.
	NativeNs *int64 `json:"nativeNs,omitempty"`
	// NativeRepeatNs is the native reference timed again in the same
	// sample, in a fresh directory under the same protocol: the A/A check.
	// NativeRepeatNs over NativeNs is the protocol's own noise, the floor
	// every difference is judged against. Present with NativeNs in
	// samples of Protocol 2 and later.
	NativeRepeatNs *int64 `json:"nativeRepeatNs,omitempty"`

	Verifier       VerifierResult `json:"verifier"`
	VerifierDetail string         `json:"verifierDetail,omitempty"`

	// Exact counts: equal across targets when the targets did the same work.
	FUSERequests map[string]int64 `json:"fuseRequests"` // by opcode: LOOKUP, GETATTR, ...
	Statements   int64            `json:"statements"`   // SQLite statements
	// StoreBytes is the Store's blobs' bytes and the bytes its database's
	// rows hold (not its files' sizes, which move with checkpoints).
	StoreBytes   int64 `json:"storeBytes"`
	OverlayBytes int64 `json:"overlayBytes"`
	Files        int64 `json:"files"` // regular files the verifier saw
	Bytes        int64 `json:"bytes"` // their total size

	// Protocol is the version of the cache protocol the sample ran under
	// (ProtocolVersion when written now); 0 in samples written before it
	// was recorded, which ran version 1.
	Protocol int `json:"protocol,omitempty"`
	// First is the side whose timed run came first in this sample,
	// SideLayerFS or SideNative (decided by the run's seed, so that the
	// sides take turns); empty without a native reference.
	First string `json:"first,omitempty"`
	// Phases is the cache protocol as it ran, in order: each side's
	// untimed warm-up and timed run, where, and the barrier before each
	// timed window. Absent in samples written before it was recorded.
	Phases []Phase `json:"phases,omitempty"`

	// FUSETransport is how the FUSE requests reached the daemon: "uring"
	// (FUSE over io_uring) or "dev" (/dev/fuse), as its stats said; empty
	// in a sample that failed before.
	FUSETransport string `json:"fuseTransport,omitempty"`

	// Precision marks a sample the precision rule added beyond the planned
	// rounds (protocol 4): its cell's A/A interval was too wide.
	Precision bool `json:"precision,omitempty"`

	// EngineRestarts counts this sample's execs that the Engine could not
	// start (they never ran: exit 126 with no pid) and that the runner
	// started again; absent when none.
	EngineRestarts int `json:"engineRestarts,omitempty"`

	Load1      float64   `json:"load1"` // the host's 1-minute load average at the start
	LockWaitNs int64     `json:"lockWaitNs"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
}

// The sides of a sample: the two of a LayerFS-over-native ratio, and the
// native reference's repeat, the other half of the A/A check.
const (
	SideLayerFS      = "layerfs"
	SideNative       = "native"
	SideNativeRepeat = "nativeRepeat"
)

// ProtocolVersion is the cache protocol the runner follows now:
//
//  1. each side's untimed warm-up, then a write-back barrier and its timed
//     run in a fresh directory; LayerFS and native take turns going first.
//  2. as 1, and every side leaves the same memory state before its window:
//     its warm-up's output goes away right after the warm-up (LayerFS's
//     unmount discards it; native's directory is removed), and after the
//     barrier a prefault makes the pages the window will write resident
//     (Barrier.PrefaultBytes); native is timed twice (NativeRepeatNs, the
//     A/A check), and the three timed runs rotate their positions across
//     rounds.
//  3. as 2, but the three timed runs take the six orders of a balanced
//     design in turn (BalancedOrders): over six rounds each side runs in
//     each position twice and right after each other side twice, and
//     consecutive rounds are mirror images. Under 2's rotation the repeat
//     ran right after native in two rounds of three and never the other
//     way round, so whatever a window leaves the next one (a warm
//     directory, a busy daemon) fell on the A/A's one side only.
//  4. as 3, and the precision rule: after the planned rounds, a cell whose
//     A/A interval on any target (the paired bootstrap's 95% interval of
//     the median of nativeRepeatNs over nativeNs) is wider than
//     AAPrecisionWidth gets another block of len(BalancedOrders) rounds on
//     every target, continuing the balanced sequence, up to
//     PrecisionBlocks blocks. The rule reads the interval's width only,
//     never where a median lies, so it cannot steer the A/A median or
//     LayerFS over native toward any value; it applies to a cell with at
//     least PrecisionMinSamples samples of every target, fewer being too few
//     for an interval to mean anything. Its samples say so (Precision).
//  5. as 4, and the runner frees no inode of its own on the Sandboxes'
//     filesystems while samples are taken: a native warm-up's files and
//     the prefault's file are emptied (truncated, their pages and blocks
//     freed as before) instead of removed, and each Sandbox is emptied and
//     stopped after its sample and removed when the run's samples are all
//     taken. (LayerFS's unmount still removes its workspace's overlay
//     files, as it does for anyone: its warm-up's go before all three
//     windows alike.) On ext4 without a journal (Machine.UnjournaledExt4),
//     every file created scans past the inodes its block group freed in
//     the last minute (six, while their inode table block is dirty): a run
//     that removed its Sandboxes as it went made its own native reference
//     of the create-heavy cells ten times slower than on a quiet disk,
//     varying from window to window and slower in a sample's first
//     windows.
const ProtocolVersion = 5

// The precision rule's bounds (protocol 4).
const (
	// AAPrecisionWidth is the widest A/A interval a cell ends its planned
	// rounds with: the width of the band 0.9-1.1 a stable reference's
	// A/A median lies in, so that the interval can tell inside from out.
	AAPrecisionWidth = 0.2
	// PrecisionBlocks is how many blocks of rounds the rule may add to a
	// cell: at most twice the default run's samples more.
	PrecisionBlocks = 2
	// PrecisionMinSamples is the fewest samples of a cell on each target
	// the rule looks at.
	PrecisionMinSamples = 5
)

// BalancedOrders are protocol 3's orders of three sides, as indexes
// into the sides' list, in the sequence the rounds take them: all six
// permutations, each pair of rounds mirror images.
var BalancedOrders = [6][3]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}}

// The kinds of a Phase.
const (
	PhaseWarmUp = "warm-up" // untimed, identical to the timed run, in an earlier directory
	PhaseTimed  = "timed"
)

// Phase is one run of a cell's body within a sample.
type Phase struct {
	Side string `json:"side"` // SideLayerFS or SideNative
	Kind string `json:"kind"` // PhaseWarmUp or PhaseTimed
	// Dir is the directory the body ran in: a LayerFS workspace, or a
	// plain directory for the native side. A timed run's is fresh: no
	// earlier phase ran there.
	Dir string `json:"dir"`
	// Discarded says a warm-up's output was gone before the next step:
	// LayerFS's unmount discards the workspace's changes, and the native
	// side removes its warm-up's directory at the same point (protocol 2).
	Discarded bool `json:"discarded,omitempty"`
	// Barrier is the write-back barrier before a timed window; nil for a
	// warm-up.
	Barrier *Barrier `json:"barrier,omitempty"`
}

// Barrier is what the runner did, and saw, just before a timed window:
// sync(2), then a wait for the kernel's dirty and write-back pages to
// drain, so that no earlier write-back lands in the window.
type Barrier struct {
	// DirtyPages and WritebackPages are /proc/vmstat's nr_dirty and
	// nr_writeback at the start of the timed window.
	DirtyPages     int64 `json:"dirtyPages"`
	WritebackPages int64 `json:"writebackPages"`
	// WaitNs is how long the sync and the drain took; Drained is false
	// when the pages had not fallen below the threshold by the deadline
	// (the window started all the same, and says so here).
	WaitNs  int64 `json:"waitNs"`
	Drained bool  `json:"drained"`
	// Unmeasured says the Sandbox's kernel has no /proc/vmstat (gVisor's
	// Sentry, whose page cache is its own): the barrier was sync(2)
	// alone, with no counts to wait on (both 0, Drained false).
	Unmeasured bool `json:"unmeasured,omitempty"`
	// PrefaultBytes is the anonymous memory touched and freed after the
	// drain, just before the window (protocol 2): on a VM whose balloon
	// reports free pages to the hypervisor, memory freed seconds ago is
	// slow to write into again, and this makes the pages the window will
	// write resident on every side alike. PrefaultNs is what it took
	// (part of WaitNs, never of the window).
	PrefaultBytes int64 `json:"prefaultBytes,omitempty"`
	PrefaultNs    int64 `json:"prefaultNs,omitempty"`
}

// FUSETotal is the sum of the FUSE request counts over all opcodes.
// KernelHousekeeping reports whether a FUSE opcode is one the kernel sends
// on its own time rather than for the work a body did: FORGET and
// BATCH_FORGET come when it evicts inodes, INTERRUPT when a caller gets a
// signal. Their counts at any moment depend on timing, so they are kept in
// a sample but never compared as work.
func KernelHousekeeping(op string) bool {
	return op == "FORGET" || op == "BATCH_FORGET" || op == "INTERRUPT"
}

// FUSEWork is FUSETotal without the kernel's housekeeping requests: the
// requests the body's work caused.
func (s *Sample) FUSEWork() int64 {
	var n int64
	for op, v := range s.FUSERequests {
		if !KernelHousekeeping(op) {
			n += v
		}
	}
	return n
}

func (s *Sample) FUSETotal() int64 {
	var n int64
	for _, v := range s.FUSERequests {
		n += v
	}
	return n
}

// FillDefaults derives what a writer may leave out: the per-exec overhead
// from the two exec times, and an empty FUSE count map.
func (s *Sample) FillDefaults() {
	if s.ExecOverheadNs == 0 && s.ExecWallNs > 0 {
		s.ExecOverheadNs = s.ExecWallNs - s.CommandNs
	}
	if s.FUSERequests == nil {
		s.FUSERequests = map[string]int64{}
	}
	if s.Verifier == "" && s.Status == StatusIneligible {
		s.Verifier = VerifierNotRun
	}
}

var (
	runIDRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	targetRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	cellNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,15}$`)
	opcodeRE   = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// Validate reports every problem with s, each naming its field. It checks
// in named steps a reviewer can take one at a time: who the sample is,
// its status and verifier, its durations and counts, the native
// reference and its A/A repeat, the protocol's phases, the FUSE counts,
// and the host's load and the sample's span.
func (s *Sample) Validate() error {
	p := &problems{doc: "sample"}
	for _, check := range []func(*problems){
		s.validateIdentity, s.validateStatus, s.validateVerifier, s.validateDurations,
		s.validateNative, s.validatePhases, s.validateFUSE, s.validateSpan,
	} {
		check(p)
	}
	return p.err()
}

// validateIdentity: the format, the run, the bundle, the target, the cell
// and the sample's place in the run.
func (s *Sample) validateIdentity(p *problems) {
	if s.FormatVersion != ResultsFormatVersion {
		p.addf("formatVersion", "is %d, want %d", s.FormatVersion, ResultsFormatVersion)
	}
	if !runIDRE.MatchString(s.RunID) {
		p.addf("runId", "%q is not a run id (letters, digits, '.', '_', '-')", s.RunID)
	}
	if err := ValidateBundleID(s.BundleID); err != nil {
		p.addf("bundleId", "%v", err)
	}
	if !targetRE.MatchString(s.Target) {
		p.addf("target", "%q is not a target name (lowercase letters, digits, '-')", s.Target)
	}
	if !cellNameRE.MatchString(s.Cell) {
		p.addf("cell", "%q is not a cell name (C01, C02, ..., T1, ...)", s.Cell)
	}
	if s.Suite != "" && !ValidSuiteName(s.Suite) {
		p.addf("suite", "%q is not a suite name", s.Suite)
	}
	if s.Round < 0 {
		p.addf("round", "is negative")
	}
	if s.Order < 0 {
		p.addf("order", "is negative")
	}
	if s.Protocol < 0 || s.Protocol > ProtocolVersion {
		p.addf("protocol", "is %d: this sealbench knows protocols 1 to %d", s.Protocol, ProtocolVersion)
	}
	if s.Precision && s.Protocol < 4 {
		p.addf("precision", "is set in a sample of protocol %d: the precision rule is protocol 4's", s.Protocol)
	}
}

// validateStatus: a status, with a reason exactly when it is not ok, and
// an ok sample's verifier passed and its timings present.
func (s *Sample) validateStatus(p *problems) {
	switch s.Status {
	case StatusOK:
		if s.Reason != "" {
			p.addf("reason", "must be empty when status is ok")
		}
		if s.Verifier != VerifierPass {
			p.addf("verifier", "is %q, but status ok means the verifier passed", s.Verifier)
		}
		if s.CommandNs <= 0 {
			p.addf("commandNs", "must be positive when status is ok")
		}
		if s.ExecWallNs <= 0 {
			p.addf("execWallNs", "must be positive when status is ok")
		}
	case StatusFailed, StatusIneligible:
		if strings.TrimSpace(s.Reason) == "" {
			p.addf("reason", "missing: a %s sample says why", s.Status)
		}
		if s.Verifier == VerifierPass && s.Status == StatusIneligible {
			p.addf("verifier", "is pass, but an ineligible cell never runs")
		}
	case "":
		p.addf("status", "missing")
	default:
		p.addf("status", "%q is not ok, failed or ineligible", s.Status)
	}
}

// validateVerifier: a known verifier result; a failed one says what it
// found (an ok sample with a failed verifier is validateStatus's).
func (s *Sample) validateVerifier(p *problems) {
	switch s.Verifier {
	case VerifierPass, VerifierNotRun:
	case VerifierFail:
		if s.Status != StatusOK && s.VerifierDetail == "" {
			p.addf("verifierDetail", "missing: a failed verifier says what it found")
		}
	case "":
		p.addf("verifier", "missing")
	default:
		p.addf("verifier", "%q is not pass, fail or notRun", s.Verifier)
	}
}

// validateDurations: no negative duration or count, and the exec overhead
// is what the two exec times say.
func (s *Sample) validateDurations(p *problems) {
	for _, d := range []struct {
		name string
		v    int64
	}{
		{"commandNs", s.CommandNs}, {"execWallNs", s.ExecWallNs}, {"mountNs", s.MountNs},
		{"unmountNs", s.UnmountNs}, {"commitNs", s.CommitNs}, {"lockWaitNs", s.LockWaitNs},
		{"statements", s.Statements}, {"storeBytes", s.StoreBytes}, {"overlayBytes", s.OverlayBytes},
		{"files", s.Files}, {"bytes", s.Bytes}, {"readyNs", s.ReadyNs},
	} {
		if d.v < 0 {
			p.addf(d.name, "is negative")
		}
	}
	if s.ExecWallNs > 0 && s.ExecOverheadNs != s.ExecWallNs-s.CommandNs {
		p.addf("execOverheadNs", "is %d, but execWallNs - commandNs is %d", s.ExecOverheadNs, s.ExecWallNs-s.CommandNs)
	}
}

// validateNative: the native reference and its A/A repeat, each positive
// when present, the repeat only beside a reference; under protocol 2 an
// ok sample with a reference has its repeat too (and under every later
// protocol); the side that went
// first is a side.
func (s *Sample) validateNative(p *problems) {
	if s.NativeNs != nil && *s.NativeNs <= 0 {
		p.addf("nativeNs", "must be positive when present")
	}
	if r := s.NativeRepeatNs; r != nil {
		switch {
		case *r <= 0:
			p.addf("nativeRepeatNs", "must be positive when present")
		case s.NativeNs == nil:
			p.addf("nativeRepeatNs", "present without nativeNs: the A/A repeat is the native reference's second run")
		}
	}
	if s.Protocol >= 2 && s.Status == StatusOK && s.NativeNs != nil && s.NativeRepeatNs == nil {
		p.addf("nativeRepeatNs", "missing: under protocol %d every native reference is timed twice (the A/A check)", s.Protocol)
	}
	switch s.First {
	case "", SideLayerFS, SideNative, SideNativeRepeat:
	default:
		p.addf("first", "%q is not %s, %s or %s", s.First, SideLayerFS, SideNative, SideNativeRepeat)
	}
}

// validatePhases: each phase a known side and kind, in an absolute
// directory; a barrier before every timed run and none before a warm-up;
// a prefault only under protocol 2.
func (s *Sample) validatePhases(p *problems) {
	for i, ph := range s.Phases {
		pf := fmt.Sprintf("phases[%d]", i)
		switch ph.Side {
		case SideLayerFS, SideNative, SideNativeRepeat:
		default:
			p.addf(pf+".side", "%q is not %s, %s or %s", ph.Side, SideLayerFS, SideNative, SideNativeRepeat)
		}
		switch ph.Kind {
		case PhaseWarmUp:
			if ph.Barrier != nil {
				p.addf(pf+".barrier", "a warm-up has no barrier")
			}
		case PhaseTimed:
			if ph.Discarded {
				p.addf(pf+".discarded", "a timed run's output is what the verifier checks: only a warm-up's is discarded")
			}
			b := ph.Barrier
			switch {
			case b == nil:
				p.addf(pf+".barrier", "missing: every timed run follows a barrier")
			case b.DirtyPages < 0 || b.WritebackPages < 0 || b.WaitNs < 0 || b.PrefaultBytes < 0 || b.PrefaultNs < 0:
				p.addf(pf+".barrier", "has a negative count")
			case b.PrefaultNs > b.WaitNs:
				p.addf(pf+".barrier.prefaultNs", "is %d, more than the whole wait before the window (%d)", b.PrefaultNs, b.WaitNs)
			case b.PrefaultBytes > 0 && s.Protocol < 2:
				p.addf(pf+".barrier.prefaultBytes", "a prefault is protocol 2's, and the sample says protocol %d", max(s.Protocol, 1))
			}
		default:
			p.addf(pf+".kind", "%q is not %s or %s", ph.Kind, PhaseWarmUp, PhaseTimed)
		}
		if !strings.HasPrefix(ph.Dir, "/") {
			p.addf(pf+".dir", "%q is not an absolute path", ph.Dir)
		}
	}
}

// validateFUSE: a known transport, and every count an opcode's name and
// not negative.
func (s *Sample) validateFUSE(p *problems) {
	switch s.FUSETransport {
	case "", "uring", "dev":
	default:
		p.addf("fuseTransport", "%q is not uring or dev", s.FUSETransport)
	}
	ops := make([]string, 0, len(s.FUSERequests))
	for op := range s.FUSERequests {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		if !opcodeRE.MatchString(op) {
			p.addf("fuseRequests", "%q is not a FUSE opcode name (upper case, such as LOOKUP)", op)
		}
		if s.FUSERequests[op] < 0 {
			p.addf("fuseRequests."+op, "is negative")
		}
	}
}

// validateSpan: a load average, a start, and an end not before it.
func (s *Sample) validateSpan(p *problems) {
	if math.IsNaN(s.Load1) || math.IsInf(s.Load1, 0) || s.Load1 < 0 {
		p.addf("load1", "%v is not a load average", s.Load1)
	}
	if s.Start.IsZero() {
		p.addf("start", "missing")
	}
	if s.End.IsZero() {
		p.addf("end", "missing")
	} else if s.End.Before(s.Start) {
		p.addf("end", "is before start")
	}
}

// ValidateBundleID checks a bundle name: build-linux-<12 lowercase hex>.
func ValidateBundleID(id string) error {
	hx, ok := strings.CutPrefix(id, BundleNamePrefix)
	if !ok || !isHex(hx, 12) {
		return fmt.Errorf("%q is not a bundle id (%s<12 lowercase hex>)", id, BundleNamePrefix)
	}
	return nil
}

// MarshalLine encodes s as one line of a samples file: compact JSON and a
// newline. Appending whole lines is what lets a reader tell a complete file
// from one cut off mid-write.
func (s *Sample) MarshalLine() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encoding sample %s/%s round %d: %w", s.Target, s.Cell, s.Round, err)
	}
	return b.Bytes(), nil
}

// ErrTruncated says that a samples file ends inside a line: the writer was
// stopped while appending.
var ErrTruncated = errors.New("the last line is cut off (no newline at the end): the run was interrupted while writing it")

// ReadSamples reads a samples file strictly, line by line: every line one
// complete sample of this format version, no unknown fields, no blank
// lines, each Loaded, FillDefaulted and Validated. All samples must share one
// run id and one bundle id, and no target, cell and round may appear twice.
// Every error names its line.
func ReadSamples(r io.Reader) ([]Sample, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Sample
	seen := map[string]int{}
	for line := 1; ; line++ {
		b, err := readLine(br, MaxSampleLine)
		if err == io.EOF {
			return out, nil
		}
		if errors.Is(err, errTornLine) {
			err = ErrTruncated
		}
		if err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		s, err := parseSampleLine(b)
		if err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		if len(out) > 0 {
			first := out[0]
			if s.RunID != first.RunID {
				return nil, &LineError{Line: line, Err: fmt.Errorf("run id %q differs from %q on line 1: a samples file holds one run", s.RunID, first.RunID)}
			}
			if s.BundleID != first.BundleID {
				return nil, &LineError{Line: line, Err: fmt.Errorf("bundle id %s differs from %s on line 1: one run uses one bundle, so these samples measured different code", s.BundleID, first.BundleID)}
			}
		}
		key := fmt.Sprintf("%s/%s round %d", s.Target, s.Cell, s.Round)
		if prev, ok := seen[key]; ok {
			return nil, &LineError{Line: line, Err: fmt.Errorf("%s appears again (first on line %d)", key, prev)}
		}
		seen[key] = line
		out = append(out, *s)
	}
}

// ReadSamplesFile reads the samples file at path with ReadSamples; an
// error reading it names the path.
func ReadSamplesFile(path string) ([]Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := ReadSamples(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return s, nil
}

func parseSampleLine(b []byte) (*Sample, error) {
	var s Sample
	if err := decodeLine(b, "sample", ResultsFormatVersion, &s); err != nil {
		return nil, err
	}
	s.FillDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// RunPins pins the identities a run measured with: the same on every
// sample of the run, so they are written once, next to the samples.
type RunPins struct {
	FormatVersion int    `json:"formatVersion"`
	Kind          string `json:"kind"`
	RunID         string `json:"runId"`
	BundleID      string `json:"bundleId"`
	ImageID       Digest `json:"imageId"` // the Sandbox image
	// ImageLock is the package lock the Sandbox image was built from, whole,
	// so that a result carries what rebuilding its image takes; absent in
	// results written before it was recorded. ImageRelocked says, when the
	// lock is a fresh one, why it is not the lock the bundle's sealbench
	// committed (its locked files could no longer be had).
	ImageLock     *PackageLock `json:"imageLock,omitempty"`
	ImageRelocked string       `json:"imageRelocked,omitempty"`
	// BundleOrigin is the registry reference the bundle was pulled from,
	// and the digest it resolved to; absent for a bundle taken from a
	// directory.
	BundleOrigin *BundleOrigin `json:"bundleOrigin,omitempty"`
	// RunnerSHA256 is the digest of the runner that ran the samples, as
	// it hashed its own executable (equal to the bundle manifest's entry
	// for RunnerPlatform's runner, or the run was refused);
	// RunnerPlatform is that runner's os/arch.
	RunnerSHA256   Digest `json:"runnerSha256"`
	RunnerPlatform string `json:"runnerPlatform,omitempty"`
	StandinSHA256  Digest `json:"standinSha256"`
	// Targets in the order they were asked for; the first is the default
	// baseline of a report.
	Targets []TargetPins `json:"targets"`

	// Machines are the memory and CPU settings of each machine whose
	// runner took samples, as it read them at the run's start (and, for
	// page reporting, its end): settings that move timings without being
	// the platform's. Absent in results written before they were recorded.
	Machines []Machine `json:"machines,omitempty"`

	StoreProfile        string            `json:"storeProfile"`        // durable, fast or disposable
	ConstructionWorkers int               `json:"constructionWorkers"` // LAYERFS_CONSTRUCTION_WORKERS
	Tools               map[string]string `json:"tools"`               // tool name to version: go, git, docker, limactl...
	Cells               []string          `json:"cells"`
	// Suites are the suites the cells are of, in the order asked for;
	// absent in results from before suites: DefaultSuite.
	Suites []string `json:"suites,omitempty"`
	// SuiteDefs are the definitions of those suites that have one (all
	// but the twelve), as they ran: what a report names their cells by.
	SuiteDefs []Suite   `json:"suiteDefs,omitempty"`
	Native    bool      `json:"native"` // whether a native reference ran beside each sample
	Seed      uint64    `json:"seed"`   // of the interleaved order and the bootstrap
	Samples   int       `json:"samples"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end,omitzero"` // zero while the run is going, or if it was interrupted
}

// BundleOrigin is where a bundle was pulled from: an OCI registry
// reference as given (oci://REGISTRY/REPO:TAG, or @DIGEST) and the digest
// of the artifact it resolved to, once, before anything ran.
type BundleOrigin struct {
	Ref    string `json:"ref"`
	Digest Digest `json:"digest"`
}

// origin checks a BundleOrigin, when there is one.
func (ps *problems) origin(field string, o *BundleOrigin) {
	if o == nil {
		return
	}
	if !strings.HasPrefix(o.Ref, "oci://") {
		ps.addf(field+".ref", "%q is not an oci:// reference", o.Ref)
	}
	if err := o.Digest.Validate(); err != nil {
		ps.addf(field+".digest", "%v", err)
	}
}

// TargetPins is what a run pinned about one target.
type TargetPins struct {
	Name        string `json:"name"`
	Engine      string `json:"engine"` // dockerd, standin or kubernetes
	Kernel      string `json:"kernel"` // uname -r inside the target
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"memoryBytes"`
	// Emulated is true where the target's CPU is emulated (QEMU TCG): its
	// timings describe the emulator, so it is a pass/fail and counts target.
	Emulated bool `json:"emulated"`
	// Transport is how the runner reached the Engine: "socket" (a unix
	// socket, forwarded or not) or "msb-exec" (every connection through
	// `msb exec`, which adds its cost to every exec's overhead).
	Transport string `json:"transport,omitempty"`
	// FUSEURing is whether LayerFS could be served over FUSE over
	// io_uring on a target on the host's kernel: the host's enable_uring
	// (the fuse module's switch, kernel-wide) as the run found or set it,
	// or off where the run asked for /dev/fuse: FUSEURingOn, FUSEURingOff; or
	// FUSEURingNA for a target on a kernel of its own. Empty in results
	// written before it was recorded. Whether a sample was served over
	// io_uring is the sample's FUSETransport.
	FUSEURing string `json:"fuseURing,omitempty"`
	// Runtime is the OCI runtime the Engine runs Sandboxes with, where
	// it is not the Engine's default: "runsc" (gVisor) on the gvisor
	// target; RuntimeVersion and RuntimePlatform are what it says of
	// itself (`runsc --version`, its --platform). Empty: the default. On
	// the kubernetes target, the RuntimeClass (see RuntimeHandler).
	Runtime         string `json:"runtime,omitempty"`
	RuntimeVersion  string `json:"runtimeVersion,omitempty"`
	RuntimePlatform string `json:"runtimePlatform,omitempty"`
	// FUSE is whose FUSE implementation serves the Sandboxes' /dev/fuse:
	// FUSELinux (the kernel's; empty means the same) or FUSEGVisor
	// (gVisor's Sentry, which sends the daemon requests of its own
	// choosing and lacks some of Linux's, such as mmap(2) of a file).
	FUSE string `json:"fuse,omitempty"`
	// Endpoint is the Engine API endpoint the runner reached the target's
	// Engine at (unix:///path/to/socket, tcp://host:port), on the machine
	// it ran on; empty in results written before it was recorded.
	Endpoint string `json:"endpoint,omitempty"`
	// DockerContext is the docker CLI context the endpoint came from
	// (docker@CONTEXT, DOCKER_CONTEXT or the current context), for a
	// docker target whose dockerd was chosen by one; empty otherwise.
	DockerContext string `json:"dockerContext,omitempty"`
	// Host is the remote host the target lives on, ssh://user@host:port
	// as a run's ledger names it (docs/design/remote-hosts.md); empty for
	// a target on the machine that made the run.
	Host string `json:"host,omitempty"`
	// RunnerHost is where the runner that took the target's samples ran,
	// in Host's form; empty for the machine that made the run. A target
	// on a remote host is sampled by a runner on that host.
	RunnerHost string `json:"runnerHost,omitempty"`
	// Cluster is, for a target that is a Kubernetes cluster, the API
	// server's version (v1.34.12); Node the node its Sandboxes ran on;
	// ContainerRuntime the node's container runtime as the node reports
	// it (containerd://1.6.20); RuntimeHandler the handler of the
	// RuntimeClass they ran with, which Runtime names (empty: the
	// cluster's default class).
	Cluster          string `json:"cluster,omitempty"`
	Node             string `json:"node,omitempty"`
	ContainerRuntime string `json:"containerRuntime,omitempty"`
	RuntimeHandler   string `json:"runtimeHandler,omitempty"`
	// AgentSandbox is, for the agent-sandbox target, the version of
	// agent-sandbox (sigs.k8s.io/agent-sandbox) whose controller runs its
	// Sandboxes, as the cluster says it (its controller's Deployment, or
	// its CRDs' app.kubernetes.io/version label), with the API version:
	// "v1.0.1 (agents.x-k8s.io/v1beta1)".
	AgentSandbox string `json:"agentSandbox,omitempty"`
	// WarmPool is, for a target whose Sandboxes were claimed from a warm
	// pool (agent-sandbox-warm), how many Sandboxes the pool kept ready:
	// its samples' ReadyNs is a claim's, warm when the pool had a ready
	// Sandbox. 0: every Sandbox was started cold.
	WarmPool int `json:"warmPool,omitempty"`
}

// Machine is what a runner read of the machine it ran on: what the
// kernel does with free memory and CPU frequency, which a benchmark must
// not change but must know. On a VM whose balloon driver does free page
// reporting, memory freed more than a couple of seconds earlier is handed
// back to the hypervisor, and the first write into it afterwards costs
// far more than a write into memory just freed: the protocol's prefault
// is there for it (Barrier.PrefaultBytes).
type Machine struct {
	// Host is where the runner ran, as TargetPins.RunnerHost says it;
	// empty for the machine that made the run.
	Host string `json:"host,omitempty"`
	// PageReporting is PageReportingActive where a balloon device
	// reports free pages to the hypervisor (virtio_balloon with its
	// free page reporting feature), PageReportingInactive where none
	// does, PageReportingUnknown where the machine does not say.
	PageReporting string `json:"pageReporting"`
	// ReportedKiBStart and ReportedKiBEnd are the kernel's count of
	// memory reported so far (page_reporting's reported_kib, where the
	// kernel exports it) at the run's start and end: growth during the
	// run is memory the hypervisor took back while it ran.
	ReportedKiBStart *int64 `json:"reportedKibStart,omitempty"`
	ReportedKiBEnd   *int64 `json:"reportedKibEnd,omitempty"`
	// Balloon is whether a memory balloon driver is bound to a device.
	Balloon bool `json:"balloon"`
	// TransparentHugepages is the kernel's THP mode: always, madvise or
	// never; empty where the kernel has none.
	TransparentHugepages string `json:"transparentHugepages,omitempty"`
	// SwapBytes is the swap space configured (0: none).
	SwapBytes int64 `json:"swapBytes"`
	// CPUFreqGovernor is cpu0's frequency governor, where the machine
	// has cpufreq (a VM often has none).
	CPUFreqGovernor string `json:"cpufreqGovernor,omitempty"`
	// UnjournaledExt4 are the mount points of the ext4 filesystems
	// mounted without a journal. There, ext4 does not reuse an inode
	// deleted less than a minute earlier (longer while its inode table
	// block is dirty), and every file created scans past all such inodes
	// at the start of its block group: creating files costs more, by how
	// much was deleted nearby in the last minute: why, under protocol 5,
	// the runner frees no inode of its own while it samples.
	UnjournaledExt4 []string `json:"unjournaledExt4,omitempty"`
}

// The values of Machine.PageReporting.
const (
	PageReportingActive   = "active"
	PageReportingInactive = "inactive"
	PageReportingUnknown  = "unknown"
)

// validate reports m's problems as field f.
func (m *Machine) validate(ps *problems, f string) {
	if m.Host != "" {
		if err := ValidateSSHHost(m.Host); err != nil {
			ps.addf(f+".host", "%v", err)
		}
	}
	switch m.PageReporting {
	case PageReportingActive, PageReportingInactive, PageReportingUnknown:
	default:
		ps.addf(f+".pageReporting", "%q is not %s, %s or %s", m.PageReporting, PageReportingActive, PageReportingInactive, PageReportingUnknown)
	}
	for _, r := range []struct {
		name string
		v    *int64
	}{{"reportedKibStart", m.ReportedKiBStart}, {"reportedKibEnd", m.ReportedKiBEnd}} {
		if r.v != nil && *r.v < 0 {
			ps.addf(f+"."+r.name, "is negative")
		}
	}
	switch m.TransparentHugepages {
	case "", "always", "madvise", "never":
	default:
		ps.addf(f+".transparentHugepages", "%q is not always, madvise or never", m.TransparentHugepages)
	}
	if m.SwapBytes < 0 {
		ps.addf(f+".swapBytes", "is negative")
	}
	for i, mp := range m.UnjournaledExt4 {
		if !strings.HasPrefix(mp, "/") {
			ps.addf(fmt.Sprintf("%s.unjournaledExt4[%d]", f, i), "%q is not an absolute mount point", mp)
		}
	}
}

// The values of TargetPins.FUSE.
const (
	FUSELinux  = "linux"
	FUSEGVisor = "gvisor"
)

// FUSEImplementation is t.FUSE, FUSELinux when unrecorded.
func (t TargetPins) FUSEImplementation() string {
	if t.FUSE == "" {
		return FUSELinux
	}
	return t.FUSE
}

// The values of TargetPins.FUSEURing.
const (
	// FUSEURingOn: enable_uring was on (the run turned it on, with
	// --fuse-uring auto or on, or it already was), so LayerFS could
	// negotiate io_uring.
	FUSEURingOn = "on"
	// FUSEURingOff: it was off (not root, or the kernel has no FUSE over
	// io_uring), or the run asked for /dev/fuse (--fuse-uring=off); the
	// runner then mounts LayerFS over /dev/fuse whatever the parameter
	// reads.
	FUSEURingOff = "off"
	// FUSEURingNA: the target runs on another kernel (a VM's guest, a
	// dockerd elsewhere), which the host's parameter does not reach.
	FUSEURingNA = "n/a"
)

// validFUSEURing reports whether v is a TargetPins.FUSEURing value (or
// empty: not recorded).
func validFUSEURing(v string) bool {
	switch v {
	case "", FUSEURingOn, FUSEURingOff, FUSEURingNA:
		return true
	}
	return false
}

// ReadRunPins reads a pins file: Load (strictly, bounded), FillDefaults,
// Validate.
func ReadRunPins(r io.Reader) (*RunPins, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPinsSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading run pins: %w", err)
	}
	if len(b) > MaxPinsSize {
		return nil, fmt.Errorf("run pins are more than %d bytes", MaxPinsSize)
	}
	var head struct {
		FormatVersion int `json:"formatVersion"`
	}
	if err := json.Unmarshal(b, &head); err == nil && head.FormatVersion != 0 && head.FormatVersion != ResultsFormatVersion {
		return nil, fmt.Errorf("run pins have format version %d; this sealbench reads version %d", head.FormatVersion, ResultsFormatVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p RunPins
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("parsing run pins: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parsing run pins: trailing data after the JSON document")
	}
	p.FillDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// FillDefaults sets what a writer may leave out: the kind, one sample,
// and empty lists and maps.
func (p *RunPins) FillDefaults() {
	if p.Kind == "" {
		p.Kind = RunPinsKind
	}
	if p.Samples == 0 {
		p.Samples = 1
	}
	if p.Tools == nil {
		p.Tools = map[string]string{}
	}
	if p.Cells == nil {
		p.Cells = []string{}
	}
	if len(p.Suites) == 0 {
		p.Suites = []string{DefaultSuite}
	}
}

// Validate reports every problem with p, each naming its field.
func (p *RunPins) Validate() error {
	ps := &problems{doc: "run pins"}
	ps.runHeader(p.FormatVersion, p.Kind, RunPinsKind, p.RunID, p.BundleID)
	for _, d := range []struct {
		name string
		d    Digest
	}{{"imageId", p.ImageID}, {"runnerSha256", p.RunnerSHA256}, {"standinSha256", p.StandinSHA256}} {
		if err := d.d.Validate(); err != nil {
			ps.addf(d.name, "%v", err)
		}
	}
	if p.ImageLock != nil {
		if err := p.ImageLock.Validate(); err != nil {
			ps.addf("imageLock", "%v", err)
		}
	}
	ps.origin("bundleOrigin", p.BundleOrigin)
	if len(p.Targets) == 0 {
		ps.addf("targets", "missing: a run has at least one target")
	}
	names := map[string]bool{}
	for i, t := range p.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		ps.target(f, t, names)
		if t.Kernel == "" {
			ps.addf(f+".kernel", "missing")
		}
		if t.CPUs <= 0 {
			ps.addf(f+".cpus", "must be positive")
		}
		if t.MemoryBytes <= 0 {
			ps.addf(f+".memoryBytes", "must be positive")
		}
	}
	hosts := map[string]bool{}
	for i := range p.Machines {
		f := fmt.Sprintf("machines[%d]", i)
		p.Machines[i].validate(ps, f)
		if hosts[p.Machines[i].Host] {
			ps.addf(f+".host", "%q is listed twice", p.Machines[i].Host)
		}
		hosts[p.Machines[i].Host] = true
	}
	switch p.StoreProfile {
	case StoreDurable, StoreFast, StoreDisposable:
	default:
		ps.addf("storeProfile", "%q is not %s, %s or %s", p.StoreProfile, StoreDurable, StoreFast, StoreDisposable)
	}
	if p.ConstructionWorkers <= 0 {
		ps.addf("constructionWorkers", "must be positive")
	}
	tools := make([]string, 0, len(p.Tools))
	for k := range p.Tools {
		tools = append(tools, k)
	}
	sort.Strings(tools)
	for _, k := range tools {
		if k == "" || p.Tools[k] == "" {
			ps.addf("tools", "entry %q=%q: both the tool and its version are required", k, p.Tools[k])
		}
	}
	if len(p.Cells) == 0 {
		ps.addf("cells", "missing")
	}
	cells := map[string]bool{}
	for i, c := range p.Cells {
		if !cellNameRE.MatchString(c) {
			ps.addf(fmt.Sprintf("cells[%d]", i), "%q is not a cell name (C01, C02, ..., T1, ...)", c)
		} else if cells[c] {
			ps.addf(fmt.Sprintf("cells[%d]", i), "%q is listed twice", c)
		}
		cells[c] = true
	}
	ps.suiteNames("suites", p.Suites)
	ps.suiteDefs("suiteDefs", p.SuiteDefs, p.Suites)
	if p.Samples <= 0 {
		ps.addf("samples", "must be positive")
	}
	if p.Start.IsZero() {
		ps.addf("start", "missing")
	}
	if !p.End.IsZero() && p.End.Before(p.Start) {
		ps.addf("end", "is before start")
	}
	return ps.err()
}

// target checks what the run's documents (pins, plan) say of every
// target, as field f: a name not in names yet (it is added), an Engine
// kind, an enable_uring value, the hosts as a ledger names them.
func (ps *problems) target(f string, t TargetPins, names map[string]bool) {
	if !targetRE.MatchString(t.Name) {
		ps.addf(f+".name", "%q is not a target name (lowercase letters, digits, '-')", t.Name)
	} else if names[t.Name] {
		ps.addf(f+".name", "%q is listed twice", t.Name)
	}
	names[t.Name] = true
	if t.Engine != EngineDockerd && t.Engine != EngineStandin && t.Engine != EngineKubernetes {
		ps.addf(f+".engine", "%q is not %s, %s or %s", t.Engine, EngineDockerd, EngineStandin, EngineKubernetes)
	}
	if !validFUSEURing(t.FUSEURing) {
		ps.addf(f+".fuseURing", "%q is not %s, %s or %s", t.FUSEURing, FUSEURingOn, FUSEURingOff, FUSEURingNA)
	}
	if t.FUSE != "" && t.FUSE != FUSELinux && t.FUSE != FUSEGVisor {
		ps.addf(f+".fuse", "%q is not %s or %s", t.FUSE, FUSELinux, FUSEGVisor)
	}
	if t.WarmPool < 0 {
		ps.addf(f+".warmPool", "is %d, below 0", t.WarmPool)
	}
	for _, h := range []struct{ field, value string }{{"host", t.Host}, {"runnerHost", t.RunnerHost}} {
		if h.value != "" {
			if err := ValidateSSHHost(h.value); err != nil {
				ps.addf(f+"."+h.field, "%v", err)
			}
		}
	}
}

// runHeader checks what the run's documents (pins, plan) all start with.
func (ps *problems) runHeader(version int, kind, wantKind, runID, bundleID string) {
	if version != ResultsFormatVersion {
		ps.addf("formatVersion", "is %d, want %d", version, ResultsFormatVersion)
	}
	if kind != wantKind {
		ps.addf("kind", "is %q, want %q", kind, wantKind)
	}
	if !runIDRE.MatchString(runID) {
		ps.addf("runId", "%q is not a run id (letters, digits, '.', '_', '-')", runID)
	}
	if err := ValidateBundleID(bundleID); err != nil {
		ps.addf("bundleId", "%v", err)
	}
}

// decodeStrict decodes one JSON document of at most limit bytes from r
// into v: no unknown fields, nothing after it.
func decodeStrict(r io.Reader, limit int64, what string, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("%s: more than %d bytes", what, limit)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parsing %s: %w", what, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("parsing %s: trailing data after the JSON document", what)
	}
	return nil
}

// Target returns the pins of the named target.
func (p *RunPins) Target(name string) (TargetPins, bool) {
	for _, t := range p.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return TargetPins{}, false
}

// CheckSamples reports every way samples do not belong to the run p pins:
// another run or bundle, a target or cell the run did not have, a round
// beyond its sample count. Each problem names the sample by index.
func (p *RunPins) CheckSamples(samples []Sample) error {
	ps := &problems{doc: "samples for run " + p.RunID}
	cells := map[string]bool{}
	for _, c := range p.Cells {
		cells[c] = true
	}
	for i, s := range samples {
		f := fmt.Sprintf("samples[%d]", i)
		if s.RunID != p.RunID {
			ps.addf(f+".runId", "is %q, but the pins are for run %q", s.RunID, p.RunID)
		}
		if s.BundleID != p.BundleID {
			ps.addf(f+".bundleId", "is %s, but the run pinned %s", s.BundleID, p.BundleID)
		}
		if _, ok := p.Target(s.Target); !ok {
			ps.addf(f+".target", "%q is not among the run's targets", s.Target)
		}
		if !cells[s.Cell] {
			ps.addf(f+".cell", "%q is not among the run's cells", s.Cell)
		}
		switch extra := PrecisionBlocks * len(BalancedOrders); {
		case !s.Precision && s.Round >= p.Samples:
			ps.addf(f+".round", "is %d, but the run took %d sample(s) per cell", s.Round, p.Samples)
		case s.Precision && (s.Round < p.Samples || s.Round >= p.Samples+extra):
			ps.addf(f+".round", "is %d in a sample the precision rule added: it adds rounds %d to %d", s.Round, p.Samples, p.Samples+extra-1)
		case s.Precision && !p.Native:
			ps.addf(f+".precision", "is set, but the run had no native reference for the rule to read")
		}
	}
	return ps.err()
}

// Marshal returns the pins as indented JSON with a trailing newline.
func (p *RunPins) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding run pins: %w", err)
	}
	return append(b, '\n'), nil
}

// ValidTargetName reports whether name can name a target in results:
// lowercase letters, digits and '-', starting with a letter.
func ValidTargetName(name string) bool { return targetRE.MatchString(name) }
