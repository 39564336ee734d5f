// Package report turns a run's samples (and its pins) into the comparison
// the twelve-cell reports make, the answer first: a summary of what ran,
// whether every count matched, the headline figures per target with their
// intervals (LayerFS over native and the command time relative to the
// baseline, each a geometric mean over cells; the per-exec overhead),
// which differences the samples show and which they do not, and what
// makes the targets hard to compare (CPUs, memory, kernel, emulation,
// transports). Then exact counts per cell and target, with every
// difference between targets flagged, because timings only compare the
// same work; then timings, each with its ratio to a baseline target and
// the geometric mean of those ratios over the cells.
//
// With two samples or more, every median carries its seeded bootstrap 95%
// interval, and so does every ratio: between targets paired by round,
// LayerFS over native paired within each sample, a summary over cells
// resampling each cell from itself. A ratio whose interval includes 1.0
// is marked "~" (no difference shown), as benchstat marks a change. The
// report states what it checks rather than printing a number it cannot
// stand behind: a LayerFS over native wholly below 0.8 marks its native
// reference suspect; mixed FUSE transports, timed windows that started
// before write-back drained, and single samples without an interval each
// get a note.
//
// Build makes a Report, a plain data model; Write renders it as Markdown,
// HTML (one self-contained page, inline SVG charts, no script), JSON or CSV.
// Compare puts two runs side by side, old against new, as benchstat does.
// Every rendering is deterministic, and each has a golden file.
package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/stats"
)

// FormatVersion is the version of the JSON and CSV reports: 2 since every
// key is lower camel case (an interval's low and high were Low and High)
// and rows carry their cell's title.
const FormatVersion = 2

// Input is one run's results.
type Input struct {
	Source  string             // where they were read from, for messages
	Pins    *manifests.RunPins // nil when the run left no pins file
	Samples []manifests.Sample // as ReadSamples returned them
	// SamplesSHA256 and PinsSHA256 are the digests of the bytes Load
	// parsed (PinsSHA256 zero without a pins file): what a check of the
	// run's signed results compares, so that it checks what is reported.
	SamplesSHA256 manifests.Digest
	PinsSHA256    manifests.Digest
	// Signature is what the host found about the run's signed results;
	// nil when nobody looked. The renderer links no signing code: the
	// host checks and fills this in, the report only says it.
	Signature *Signature
}

// Signature is what the host's check of a run's results attestation
// (results.sigstore.json) found.
type Signature struct {
	// State is SignatureUnsigned, SignatureVerified, SignatureUnchecked or
	// SignatureInvalid.
	State string `json:"state"`
	// Key names the signing key: "sha256:" and the hex digest of its
	// public key's DER (PKIX) encoding. Empty when unsigned.
	Key string `json:"key,omitempty"`
	// Detail says why, in one line: what was altered, or which key was
	// expected.
	Detail string `json:"detail,omitempty"`
}

// The states of a Signature.
const (
	SignatureUnsigned  = "unsigned"  // the run left no results attestation
	SignatureVerified  = "verified"  // signed; the signature and every subject check with the key given
	SignatureUnchecked = "unchecked" // signed, but no key was given to check it with
	SignatureInvalid   = "invalid"   // signed, but altered, of another run, or by another key
)

// Options tune Build. The zero Options are the defaults.
type Options struct {
	// Baseline is the target the ratios are to; by default the first
	// target (the first the run's pins list).
	Baseline string
	// Seed seeds the bootstrap; by default the first run's seed.
	Seed uint64
	// Resamples is the bootstrap's resample count; by default
	// stats.DefaultResamples.
	Resamples int
}

// Level is the confidence level of every interval.
const Level = stats.Level

// Report is the comparison, ready to render.
type Report struct {
	FormatVersion int          `json:"formatVersion"`
	Baseline      string       `json:"baseline"`
	Targets       []TargetInfo `json:"targets"`
	// Hosts are the targets grouped by the host they live on, each with
	// the pins its targets share: the machine under them, where the
	// runner ran, how it reached their Engine.
	Hosts []HostInfo `json:"hosts"`
	Runs  []RunInfo  `json:"runs"`
	Cells []CellInfo `json:"cells"`
	// Suites are the suites the cells are of, each with its cells, in
	// the order of Cells; absent from reports from before suites.
	Suites []SuiteInfo `json:"suites,omitempty"`
	Level  float64     `json:"level"`
	Seed   uint64      `json:"seed"`
	// Summary is the answer first: what ran, whether the counts match,
	// the headline figures with their intervals, what makes the targets
	// hard to compare.
	Summary Overview `json:"summary"`
	// Counts has one row per cell and count; each row's Values follow Targets.
	Counts []CountRow `json:"counts"`
	// Opcodes has one row per cell and FUSE opcode (without the kernel's
	// housekeeping), as Counts: the detail of the fuseRequests rows.
	Opcodes     []CountRow   `json:"opcodes"`
	Differences []Difference `json:"differences"`
	Problems    []Problem    `json:"problems"` // failed samples
	// Unsupported are the ineligible samples: cells a target cannot run
	// (its Reason says why), which are not failures.
	Unsupported []Problem `json:"unsupported"`
	Timings     []Timing  `json:"timings"`
	Notes       []string  `json:"notes"`

	// aaChecks is, per target and cell, why its native reference failed
	// the A/A check, or "": Build's, for the headline metrics.
	aaChecks map[string]map[string]string
}

// TargetInfo is what the report knows about one target: what its run
// pinned (manifests.TargetPins, as the run wrote it; only the name for a
// run without pins), and what its samples say.
type TargetInfo struct {
	manifests.TargetPins
	RunID   string `json:"runId"`
	Samples int    `json:"samples"` // samples read
	// FUSETransports are the FUSE transports that served the target's
	// samples, "uring" before "dev": two when they were mixed, none when
	// the samples do not say.
	FUSETransports []string `json:"fuseTransports,omitempty"`
	// TimedWindows counts the timed windows (of every side) in the
	// target's samples that count, as their phases recorded them;
	// UndrainedWindows those that started before the kernel's dirty pages
	// had drained (barrier.drained false).
	TimedWindows     int `json:"timedWindows,omitempty"`
	UndrainedWindows int `json:"undrainedWindows,omitempty"`
}

// FUSETransportText is the target's FUSE transports as the report prints
// them: "uring", "dev", "uring / dev", or a dash.
func (t TargetInfo) FUSETransportText() string {
	text := "—"
	if len(t.FUSETransports) > 0 {
		text = strings.Join(t.FUSETransports, " / ")
	}
	if t.FUSEURing != "" {
		text += " (enable_uring " + t.FUSEURing + ")"
	}
	return text
}

// RunInfo is one run's provenance.
type RunInfo struct {
	Source              string            `json:"source"`
	RunID               string            `json:"runId"`
	BundleID            string            `json:"bundleId"`
	Pinned              bool              `json:"pinned"` // whether a pins file was read
	ImageID             string            `json:"imageId,omitempty"`
	RunnerSHA256        string            `json:"runnerSha256,omitempty"`
	StandinSHA256       string            `json:"standinSha256,omitempty"`
	StoreProfile        string            `json:"storeProfile,omitempty"`
	ConstructionWorkers int               `json:"constructionWorkers,omitempty"`
	Tools               map[string]string `json:"tools,omitempty"`
	SamplesPerCell      int               `json:"samplesPerCell,omitempty"`
	Seed                uint64            `json:"seed"`
	Signature           *Signature        `json:"signature,omitempty"` // as the host found it; nil when nobody looked
	// Machines are the pins' Machines: what the kernel under each runner
	// does with free memory and CPU frequency.
	Machines      []manifests.Machine `json:"machines,omitempty"`
	Start         time.Time           `json:"start,omitzero"`
	End           time.Time           `json:"end,omitzero"`
	LockWaitMaxNs int64               `json:"lockWaitMaxNs"`
	Load1Min      float64             `json:"load1Min"`
	Load1Max      float64             `json:"load1Max"`
}

// CellInfo names a cell.
type CellInfo struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Suite is the suite the cell is of; Verifies what its verifier
	// checks.
	Suite    string `json:"suite,omitempty"`
	Verifies string `json:"verifies,omitempty"`
}

// SuiteInfo is a suite of the report's cells.
type SuiteInfo struct {
	Name  string   `json:"name"`
	Title string   `json:"title"`
	Cells []string `json:"cells"`
}

// OwnSections says whether the report shows its suites in sections of
// their own: when it holds a suite other than the twelve, or more than
// one. A report of the twelve alone reads as it did before suites.
func (r *Report) OwnSections() bool {
	return len(r.Suites) > 1 || len(r.Suites) == 1 && r.Suites[0].Name != manifests.DefaultSuite
}

// CellLabel is how a table names a cell: its code and its title ("C01
// create 1,000 files"), or the code alone for a cell the report lacks.
func (r *Report) CellLabel(name string) string {
	for _, c := range r.Cells {
		if c.Name == name {
			return c.Name + " " + c.Title
		}
	}
	return name
}

// knownSuites are the suites a report can name cells of: the built-in
// ones, then those the runs' pins define that are not (a --suite-dir's).
func knownSuites(inputs []Input) []*cells.Suite {
	known := cells.Suites()
	for _, in := range inputs {
		if in.Pins == nil {
			continue
		}
		for i := range in.Pins.SuiteDefs {
			def := &in.Pins.SuiteDefs[i]
			if !slices.ContainsFunc(known, func(s *cells.Suite) bool { return s.Name == def.Name }) {
				known = append(known, cells.NewSuite(def, nil))
			}
		}
	}
	return known
}

// lookupCell finds cell name in suites, or says it is in none.
func lookupCell(suites []*cells.Suite, name string) (*cells.Cell, error) {
	for _, s := range suites {
		if c := s.Cell(name); c != nil {
			return c, nil
		}
	}
	return nil, &cells.UnknownError{Name: name}
}

// CountRow is one exact count of one cell on every target.
type CountRow struct {
	Cell   string   `json:"cell"`
	Title  string   `json:"title"`  // the cell's, as CellInfo says it
	Count  string   `json:"count"`  // "result", "fuseRequests", "statements", ...
	Values []string `json:"values"` // per target; "a / b" where samples disagree, "" where none
	// Differs is true when the targets do not all show one same value.
	Differs bool `json:"differs"`
}

// Difference is one count that is not equal across targets (or across one
// target's samples).
type Difference struct {
	Cell   string            `json:"cell"`
	Count  string            `json:"count"` // as CountRow.Count, or "fuseRequests.LOOKUP" for one opcode
	Values map[string]string `json:"values"`
	// Why explains a difference that does not mean different work: FUSE
	// request counts between targets whose kernels differ. Empty when
	// nothing explains it.
	Why string `json:"why,omitempty"`
}

// Explained reports whether every difference has an explanation.
func (r *Report) Explained() bool { return r.Unexplained() == 0 }

// Unexplained counts the differences nothing explains: those that make
// their cells' timings compare different work.
func (r *Report) Unexplained() int {
	n := 0
	for _, d := range r.Differences {
		if d.Why == "" {
			n++
		}
	}
	return n
}

// Problem is a sample that failed or was ineligible.
type Problem struct {
	Target string `json:"target"`
	Cell   string `json:"cell"`
	Round  int    `json:"round"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Timing is one timed phase across cells and targets.
type Timing struct {
	Metric string `json:"metric"` // commandNs, execWallNs, ...
	Title  string `json:"title"`
	// Unit is UnitNs for durations, or UnitTimes for a ratio metric
	// (layerfsOverNative): its "medianNs" values are then ratios of
	// medians, paired within each sample, and its ratios between targets
	// ratios of those ratios, paired by round.
	Unit string      `json:"unit"`
	Rows []TimingRow `json:"rows"`
	// Notes say what a reader of this timing must know: which values are
	// suspect, and why they may be.
	Notes []string `json:"notes,omitempty"`
	// Mark is what a value that fails the timing's check is marked with
	// ("suspect reference", "unstable"); empty for a timing without one.
	Mark string `json:"mark,omitempty"`

	// n is how many samples most of the report's values are medians of;
	// a value of another n says its own.
	n int
	// GeoMean is, per target, the geometric mean over cells of the ratio to
	// the baseline, over the cells where both have a value.
	GeoMean []Summary `json:"geoMean"`
	// MedianOverCells is, per target, the median over cells of the cell
	// medians (ns): the "fixed overhead per exec" is this for
	// execOverheadNs.
	MedianOverCells []Summary `json:"medianOverCells"`
	// ValueGeoMean is, for a ratio metric, per target, the geometric mean
	// over cells of the values themselves (LayerFS over native over all
	// cells); absent for durations.
	ValueGeoMean []Summary `json:"valueGeoMean,omitempty"`
	// Suites are, in a report of more than one suite, the same summaries
	// over each suite's cells alone: a geometric mean over two suites'
	// cells would weigh one suite's workload by how many cells it has.
	Suites []SuiteTiming `json:"suites,omitempty"`
}

// SuiteTiming is a Timing's summaries over one suite's cells.
type SuiteTiming struct {
	Suite           string    `json:"suite"`
	GeoMean         []Summary `json:"geoMean"`
	MedianOverCells []Summary `json:"medianOverCells"`
	ValueGeoMean    []Summary `json:"valueGeoMean,omitempty"`
}

// TimingRow is one cell's values of one Timing, per target.
type TimingRow struct {
	Cell   string        `json:"cell"`
	Title  string        `json:"title"` // the cell's, as CellInfo says it
	Values []TimingValue `json:"values"`
}

// TimingValue is one target's value in one cell.
type TimingValue struct {
	N        int      `json:"n"`                  // samples that count (status ok)
	MedianNs *float64 `json:"medianNs,omitempty"` // absent when N is 0
	// Samples are the N samples' own values in round order (for a ratio
	// metric, each sample's own ratio), so that a reader sees every one:
	// a bimodal cell is seen, not averaged.
	Samples []float64 `json:"samples,omitempty"`
	// MedianCI is the bootstrap interval of MedianNs, with 2 or more
	// samples: of the median, or for a ratio metric of the ratio of
	// medians, paired within each sample.
	MedianCI *stats.Interval `json:"medianCi,omitempty"`
	// MedianNoDifference is, for a ratio metric with an interval, whether
	// that interval includes 1.0 (LayerFS no different from native, as
	// far as the samples show); absent otherwise.
	MedianNoDifference *bool `json:"medianNoDifference,omitempty"`
	// Clusters are the samples' separated clusters (stats.ClusterRule),
	// when they fall into more than one: a table then shows each
	// cluster's median and count rather than the one median, which would
	// describe neither.
	Clusters []stats.Cluster `json:"clusters,omitempty"`
	// Suspect marks a ratio metric's value below its sanity bound (the
	// whole interval, or a single sample): its reference is suspect.
	Suspect bool            `json:"suspect,omitempty"`
	Ratio   *float64        `json:"ratio,omitempty"` // median / the baseline's median
	CI      *stats.Interval `json:"ci,omitempty"`    // bootstrap interval of Ratio, with 2 or more paired rounds
	Pairs   int             `json:"pairs,omitempty"` // rounds paired with the baseline for CI
	// NoDifference is whether CI includes 1.0: the samples show no
	// difference from the baseline. Absent without CI.
	NoDifference *bool `json:"noDifference,omitempty"`
	// RatioSuspect marks a Ratio that divides a suspect value (this
	// target's or the baseline's).
	RatioSuspect bool `json:"ratioSuspect,omitempty"`
}

// Summary is one target's summary value over cells.
type Summary struct {
	Value *float64 `json:"value,omitempty"`
	Cells int      `json:"cells"` // how many cells it is over
	// Suspect counts the cells among them whose value is suspect.
	Suspect int `json:"suspect,omitempty"`
	// CI is the bootstrap interval of Value, each resample drawing every
	// cell's samples (or rounds, for a ratio between targets) from that
	// cell alone; absent unless every cell it is over has two or more.
	CI *stats.Interval `json:"ci,omitempty"`
	// NoDifference is, for a summary of ratios with CI, whether CI
	// includes 1.0.
	NoDifference *bool `json:"noDifference,omitempty"`
	// LeftOut are, for a headline figure, the cells it is not over, each
	// with why: their reference failed a check (the A/A check, or a value
	// no FUSE layer can reach). Inconclusive says more than a quarter of
	// the cells were left out, and Value is then absent: what is left
	// cannot stand for the run.
	LeftOut      []LeftOut `json:"leftOut,omitempty"`
	Inconclusive bool      `json:"inconclusive,omitempty"`
}

// LeftOut is a cell a headline figure leaves out, and why.
type LeftOut struct {
	Cell string `json:"cell"`
	Why  string `json:"why"`
}

// The count rows, in order.
var countNames = []struct{ key, title string }{
	{"result", "result"},
	{"fuseRequests", "FUSE requests"},
	{"statements", "SQLite statements"},
	{"files", "files"},
	{"bytes", "bytes"},
	{"storeBytes", "Store bytes"},
	{"overlayBytes", "overlay bytes"},
}

// CountTitle returns a count's human name.
func CountTitle(key string) string {
	for _, c := range countNames {
		if c.key == key {
			return c.title
		}
	}
	if op, ok := strings.CutPrefix(key, "fuseRequests."); ok {
		return "FUSE " + op
	}
	return key
}

func countValue(s *manifests.Sample, key string) string {
	switch key {
	case "result":
		switch {
		case s.Status == manifests.StatusOK:
			return "pass"
		case s.Verifier == manifests.VerifierFail:
			return "FAIL"
		default:
			return string(s.Status)
		}
	case "fuseRequests":
		return strconv.FormatInt(s.FUSEWork(), 10)
	case "statements":
		return strconv.FormatInt(s.Statements, 10)
	case "files":
		return strconv.FormatInt(s.Files, 10)
	case "bytes":
		return strconv.FormatInt(s.Bytes, 10)
	case "storeBytes":
		return strconv.FormatInt(s.StoreBytes, 10)
	case "overlayBytes":
		return strconv.FormatInt(s.OverlayBytes, 10)
	}
	if op, ok := strings.CutPrefix(key, "fuseRequests."); ok {
		return strconv.FormatInt(s.FUSERequests[op], 10)
	}
	panic("unknown count " + key)
}

// The units of a Timing.
const (
	UnitNs    = "ns"
	UnitTimes = "times"
)

// metric is one timing the report shows.
type metric struct {
	name, title, unit string
	// of is the metric's value in one sample; false where it has none.
	of func(*manifests.Sample) (float64, bool)
	// over, set for a ratio metric, is what of is divided by within each
	// sample: the metric is median(of)/median(over), its interval paired
	// within each sample, and its ratio between targets the ratio of those
	// ratios, paired by round.
	over func(*manifests.Sample) (float64, bool)
	// check, when set, says why a cell's value of this metric cannot be
	// taken at its word ("" when it can): the value is then marked
	// (TimingValue.Suspect) with mark, and rule says the check and its
	// reason, for the notes.
	check func(v float64) string
	mark  string
	rule  string
	// headline says the metric's ValueGeoMean is a headline figure: it
	// leaves out the cells whose reference fails a check, its own or the
	// A/A's, and says so (Summary.LeftOut, Summary.Inconclusive).
	headline bool
	// withinTarget says the metric compares a target with itself (the
	// A/A check): it has no ratio to the baseline.
	withinTarget bool
	// sparse says only some cells have the metric (those that ask for
	// it): a cell no target has a value for gets no row.
	sparse bool
}

// The bounds of the checks (see the metrics' rules).
const (
	// ImplausibleBelow is the least LayerFS over native a FUSE layer can
	// physically reach.
	ImplausibleBelow = 0.67
	// AALow and AAHigh bound the A/A ratio of a stable reference.
	AALow, AAHigh = 0.9, 1.1
	// InconclusiveShare: a headline that would leave out more than this
	// share of its cells gives no number.
	InconclusiveShare = 0.25
)

// The rules of the checks, as the notes state them.
const (
	implausibleRule = "LayerFS over native below 0.67 is physically implausible: LayerFS does the native body's work on the same kind of file " +
		"(with FUSE passthrough, in the same page cache and on the same filesystem) and adds FUSE's round trips, so it cannot take much less time " +
		"than native; allowing a third for noise, a value below 1/1.5 says the native run was slowed (memory freed long before, write-back, " +
		"a cold directory), not that LayerFS was fast"
	aaRule = "the A/A check times the native reference twice in every sample, in fresh directories under the same protocol; " +
		"a cell whose repeat over its first run has a median outside 0.9-1.1 has a reference that does not hold still, " +
		"and its LayerFS over native says more about that than about LayerFS"
)

func duration(name, title string, get func(*manifests.Sample) int64) metric {
	return metric{name: name, title: title, unit: UnitNs, of: func(s *manifests.Sample) (float64, bool) { return float64(get(s)), true }}
}

func nativeNs(s *manifests.Sample) (float64, bool) {
	if s.NativeNs == nil || *s.NativeNs <= 0 {
		return 0, false
	}
	return float64(*s.NativeNs), true
}

// positive is a duration a sample may lack (0): absent then.
func positive(get func(*manifests.Sample) int64) func(*manifests.Sample) (float64, bool) {
	return func(s *manifests.Sample) (float64, bool) { v := get(s); return float64(v), v > 0 }
}

var readyNs = positive(func(s *manifests.Sample) int64 { return s.ReadyNs })

func nativeRepeatNs(s *manifests.Sample) (float64, bool) {
	if s.NativeRepeatNs == nil || *s.NativeRepeatNs <= 0 {
		return 0, false
	}
	return float64(*s.NativeRepeatNs), true
}

// outsideTimes writes v, a ratio outside [lo, hi], as times does, with a
// third decimal where two would round it onto the range ("1.104x", not
// "1.10x", for an A/A outside 0.9-1.1).
func outsideTimes(v, lo, hi float64) string {
	if r, _ := strconv.ParseFloat(ratio(v), 64); r >= lo && r <= hi {
		return strconv.FormatFloat(v, 'f', 3, 64) + "x"
	}
	return times(v)
}

// aaMetric is the A/A check: the native reference's repeat over its
// first run, paired within each sample.
var aaMetric = metric{
	name: "nativeRepeatOverNative", title: "A/A: each sample's native reference timed again, over its first run (the protocol's own noise), the median over samples", unit: UnitTimes,
	of: nativeRepeatNs, over: nativeNs,
	check: func(v float64) string {
		if v < AALow || v > AAHigh {
			return "reference unstable: A/A " + outsideTimes(v, AALow, AAHigh)
		}
		return ""
	},
	mark: "unstable", rule: aaRule, withinTarget: true,
}

// The timings, in order.
var metrics = []metric{
	duration("commandNs", "Command time on the Sandbox's own clock", func(s *manifests.Sample) int64 { return s.CommandNs }),
	duration("execWallNs", "Exec wall time on the runner side", func(s *manifests.Sample) int64 { return s.ExecWallNs }),
	duration("execOverheadNs", "Per-exec overhead (exec wall minus command time)", func(s *manifests.Sample) int64 { return s.ExecOverheadNs }),
	{name: "readyNs", title: "Time to a usable Sandbox: from the create request to its first exec's answer (cold, unless the target claims its Sandboxes from a warm pool)", unit: UnitNs, of: readyNs},
	{name: "exitNs", title: "The Sandbox's exit: its stop (its removal, where the Engine cannot stop one), as the runner times it", unit: UnitNs, of: positive(func(s *manifests.Sample) int64 { return s.ExitNs })},
	{name: "launchToExitNs", title: "The whole task, launch to exit: the time to a usable Sandbox, the timed window's exec wall time and the Sandbox's exit, added (for the cells that ask for it)", unit: UnitNs, of: positive(func(s *manifests.Sample) int64 { return s.LaunchToExitNs }), sparse: true},
	duration("mountNs", "Mount", func(s *manifests.Sample) int64 { return s.MountNs }),
	duration("commitNs", "Commit", func(s *manifests.Sample) int64 { return s.CommitNs }),
	duration("unmountNs", "Unmount", func(s *manifests.Sample) int64 { return s.UnmountNs }),
	{name: "nativeNs", title: "Native reference: the same body on a plain directory, no LayerFS", unit: UnitNs, of: nativeNs},
	// The ratio a target's own disk cannot skew: targets keep their
	// Sandboxes in different places, and where a directory lands changes
	// what creating files costs there (see the runner's scratch), so
	// command times of create-heavy cells differ between targets on one
	// machine for reasons that are not the platform's. LayerFS's cost
	// over native in the same Sandbox does not.
	{
		name: "layerfsOverNative", title: "LayerFS over native: each sample's command time over its native reference, the median over samples", unit: UnitTimes,
		of: func(s *manifests.Sample) (float64, bool) {
			if _, ok := nativeNs(s); !ok {
				return 0, false
			}
			return float64(s.CommandNs), true
		},
		over: nativeNs,
		check: func(v float64) string {
			if v < ImplausibleBelow {
				return "implausible: LayerFS " + outsideTimes(v, ImplausibleBelow, math.Inf(1)) + " native"
			}
			return ""
		},
		mark: markSuspect, rule: implausibleRule, headline: true,
	},
	aaMetric,
}

// InputError says the results cannot make a report; the command line
// reports it as unusable input.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// Build makes the report. It refuses results it cannot compare: none at
// all, an unknown cell, runs of different bundles, a target in two runs,
// samples that do not belong to their pins, and a baseline that is not
// among the targets.
func Build(inputs []Input, opt Options) (*Report, error) {
	if len(inputs) == 0 {
		return nil, inputErrorf("no results given")
	}
	r := &Report{FormatVersion: FormatVersion, Level: Level, Opcodes: []CountRow{}, Differences: []Difference{}, Problems: []Problem{}, Unsupported: []Problem{}, Notes: []string{}}
	byTarget := map[string][]*manifests.Sample{}
	targetRun := map[string]int{}
	seen := map[string]bool{}
	known := knownSuites(inputs)
	var bundle string
	for i, in := range inputs {
		if len(in.Samples) == 0 {
			return nil, inputErrorf("%s: no samples", in.Source)
		}
		first := in.Samples[0]
		if bundle == "" {
			bundle = first.BundleID
		} else if first.BundleID != bundle {
			return nil, inputErrorf("%s: bundle %s, but %s used %s: runs of different bundles measured different code", in.Source, first.BundleID, inputs[0].Source, bundle)
		}
		if in.Pins != nil {
			if err := in.Pins.CheckSamples(in.Samples); err != nil {
				return nil, &InputError{Err: fmt.Errorf("%s: %w", in.Source, err)}
			}
		}
		run := RunInfo{Source: in.Source, RunID: first.RunID, BundleID: first.BundleID, Signature: in.Signature, Load1Min: math.Inf(1)}
		if p := in.Pins; p != nil {
			run.Pinned = true
			run.ImageID, run.RunnerSHA256, run.StandinSHA256 = p.ImageID.String(), p.RunnerSHA256.String(), p.StandinSHA256.String()
			run.StoreProfile, run.ConstructionWorkers, run.Tools = p.StoreProfile, p.ConstructionWorkers, p.Tools
			run.SamplesPerCell, run.Seed, run.Start, run.End = p.Samples, p.Seed, p.Start, p.End
			run.Machines = p.Machines
		}
		var runTargets []string
		if in.Pins != nil {
			for _, t := range in.Pins.Targets {
				runTargets = append(runTargets, t.Name)
			}
		}
		var extra []string
		for j := range in.Samples {
			s := &in.Samples[j]
			c, err := lookupCell(known, s.Cell)
			if err != nil {
				return nil, &InputError{Err: fmt.Errorf("%s: sample %d (%s): %w", in.Source, j+1, s.Target, err)}
			}
			if !seen[c.Name] {
				seen[c.Name] = true
			}
			if !slices.Contains(runTargets, s.Target) && !slices.Contains(extra, s.Target) {
				extra = append(extra, s.Target)
			}
			byTarget[s.Target] = append(byTarget[s.Target], s)
			run.LockWaitMaxNs = max(run.LockWaitMaxNs, s.LockWaitNs)
			run.Load1Min, run.Load1Max = min(run.Load1Min, s.Load1), max(run.Load1Max, s.Load1)
		}
		sort.Strings(extra)
		for _, t := range append(runTargets, extra...) {
			if prev, ok := targetRun[t]; ok {
				return nil, inputErrorf("target %s is in two runs, %s and %s: give one run per target", t, inputs[prev].Source, in.Source)
			}
			targetRun[t] = i
			ti := TargetInfo{TargetPins: manifests.TargetPins{Name: t}, RunID: first.RunID, Samples: len(byTarget[t])}
			if in.Pins != nil {
				if tp, ok := in.Pins.Target(t); ok {
					ti.TargetPins = tp
					ti.FUSE = tp.FUSEImplementation()
				}
			}
			r.Targets = append(r.Targets, ti)
		}
		r.Runs = append(r.Runs, run)
	}
	var names []string
	for _, t := range r.Targets {
		names = append(names, t.Name)
	}
	r.Baseline = opt.Baseline
	if r.Baseline == "" {
		r.Baseline = names[0]
	} else if !slices.Contains(names, r.Baseline) {
		return nil, inputErrorf("baseline %q is not among the targets in the results (%s)", r.Baseline, strings.Join(names, ", "))
	}
	r.Seed = opt.Seed
	if r.Seed == 0 {
		r.Seed = r.Runs[0].Seed
	}
	resamples := opt.Resamples
	if resamples == 0 {
		resamples = stats.DefaultResamples
	}
	for _, st := range known { // the twelve first, in their order
		si := SuiteInfo{Name: st.Name, Title: st.Title}
		for _, c := range st.Cells {
			if seen[c.Name] {
				r.Cells = append(r.Cells, CellInfo{Name: c.Name, Title: c.Title, Suite: st.Name, Verifies: c.Verifies})
				si.Cells = append(si.Cells, c.Name)
			}
		}
		if len(si.Cells) > 0 {
			r.Suites = append(r.Suites, si)
		}
	}
	for _, t := range r.Targets {
		if t.Emulated {
			r.Notes = append(r.Notes, fmt.Sprintf("%s runs under CPU emulation: its timings describe the emulator, so it is a pass/fail and exact-counts target.", t.Name))
		}
		if n := t.transportNote(); n != "" {
			r.Notes = append(r.Notes, n)
		}
		if t.Engine == "" {
			r.Notes = append(r.Notes, fmt.Sprintf("%s has no pins (no %s was read with its samples): its kernel, CPUs and memory are unknown.", t.Name, manifests.PinsFile))
		}
	}

	// index: cell -> target -> samples, by round.
	idx := map[string]map[string][]*manifests.Sample{}
	for t, ss := range byTarget {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Round < ss[j].Round })
		for _, s := range ss {
			if idx[s.Cell] == nil {
				idx[s.Cell] = map[string][]*manifests.Sample{}
			}
			idx[s.Cell][t] = append(idx[s.Cell][t], s)
			pr := Problem{Target: t, Cell: s.Cell, Round: s.Round, Status: string(s.Status), Reason: s.Reason, Detail: s.VerifierDetail}
			switch s.Status {
			case manifests.StatusOK:
			case manifests.StatusIneligible:
				r.Unsupported = append(r.Unsupported, pr)
			default:
				r.Problems = append(r.Problems, pr)
			}
		}
	}
	for _, ps := range [][]Problem{r.Problems, r.Unsupported} {
		sort.Slice(ps, func(i, j int) bool {
			a, b := ps[i], ps[j]
			return a.Cell+"\x00"+a.Target+"\x00"+fmt.Sprint(a.Round) < b.Cell+"\x00"+b.Target+"\x00"+fmt.Sprint(b.Round)
		})
	}

	r.buildCounts(idx, names)
	r.checkAA(idx)
	for _, m := range metrics {
		tm, ok := r.buildTiming(idx, names, m, resamples, r.Cells)
		if !ok {
			continue
		}
		for _, su := range r.Suites {
			if len(r.Suites) == 1 {
				break // the summaries over all cells are the suite's
			}
			cells := slices.DeleteFunc(slices.Clone(r.Cells), func(c CellInfo) bool { return c.Suite != su.Name })
			if st, ok := r.buildTiming(idx, names, m, resamples, cells); ok {
				tm.Suites = append(tm.Suites, SuiteTiming{Suite: su.Name, GeoMean: st.GeoMean, MedianOverCells: st.MedianOverCells, ValueGeoMean: st.ValueGeoMean})
			}
		}
		r.Timings = append(r.Timings, tm)
	}
	if n := r.samplesPerValue(); n > 1 {
		for i := range r.Timings {
			r.Timings[i].n = n
		}
	}
	r.buildHosts()
	r.noteExecTransports()
	r.noteTransports(byTarget)
	r.noteBarriers(byTarget)
	r.noteRestarts(byTarget)
	r.noteSingleSamples()
	total := 0
	extended := map[string]int{}
	for _, in := range inputs {
		total += len(in.Samples)
		for _, s := range in.Samples {
			if s.Precision {
				extended[s.Cell]++
			}
		}
	}
	r.buildOverview(total)
	for _, c := range r.Cells {
		if n := extended[c.Name]; n > 0 {
			r.Summary.Extended = append(r.Summary.Extended, Extension{Cell: c.Name, Samples: n})
		}
	}
	return r, nil
}

// Extension is a cell the precision rule (protocol 4) gave more rounds:
// its A/A interval was wider than manifests.AAPrecisionWidth after the
// planned ones. Samples counts the added samples, over every target.
type Extension struct {
	Cell    string `json:"cell"`
	Samples int    `json:"samples"`
}

func (r *Report) buildCounts(idx map[string]map[string][]*manifests.Sample, names []string) {
	for _, c := range r.Cells {
		// Every opcode any target saw in this cell.
		ops := map[string]bool{}
		for _, ss := range idx[c.Name] {
			for _, s := range ss {
				for op := range s.FUSERequests {
					if !manifests.KernelHousekeeping(op) { // the kernel's timing, not the work
						ops[op] = true
					}
				}
			}
		}
		keys := make([]string, 0, len(countNames)+len(ops))
		for _, cn := range countNames {
			keys = append(keys, cn.key)
		}
		var opKeys []string
		for op := range ops {
			opKeys = append(opKeys, "fuseRequests."+op)
		}
		sort.Strings(opKeys)
		keys = append(keys, opKeys...)
		for _, key := range keys {
			values := countValues(idx[c.Name], names, func(s *manifests.Sample) string { return countValue(s, key) })
			differs := valuesDiffer(values)
			if differs {
				d := Difference{Cell: c.Name, Count: key, Values: map[string]string{}}
				for i, t := range names {
					d.Values[t] = values[i]
				}
				d.Why = cmp.Or(r.kernelsExplain(key, values), r.flushExplains(idx[c.Name], names, key))
				r.Differences = append(r.Differences, d)
			}
			// Opcodes are rows of their own: the detail of the FUSE
			// requests, which a table folds away.
			row := CountRow{Cell: c.Name, Title: c.Title, Count: key, Values: values, Differs: differs}
			if strings.HasPrefix(key, "fuseRequests.") {
				r.Opcodes = append(r.Opcodes, row)
			} else {
				r.Counts = append(r.Counts, row)
			}
		}
	}
}

// NotSupported is a count's value for a target whose samples of the cell
// were all ineligible: the cell is not supported by that backend.
const NotSupported = "not supported"

// countValues are, per target in names, the distinct values value gives
// that target's samples (of one cell, by target), joined by " / ". A
// target's ineligible samples did no LayerFS work: they are left out, and
// a target with no other shows NotSupported, compared with no one.
func countValues(byTarget map[string][]*manifests.Sample, names []string, value func(*manifests.Sample) string) []string {
	values := make([]string, len(names))
	for i, t := range names {
		var distinct []string
		ss := byTarget[t]
		for _, s := range ss {
			if v := value(s); s.Status != manifests.StatusIneligible && !slices.Contains(distinct, v) {
				distinct = append(distinct, v)
			}
		}
		values[i] = strings.Join(distinct, " / ")
		if len(distinct) == 0 && len(ss) > 0 {
			values[i] = NotSupported
		}
	}
	return values
}

// valuesDiffer says whether countValues' values are not one same value:
// two targets disagree, or one target's samples do.
func valuesDiffer(values []string) bool {
	first := ""
	for _, v := range values {
		if v == NotSupported {
			continue
		}
		if first == "" {
			first = v
		}
		if v != first || v == "" || strings.Contains(v, " / ") {
			return true
		}
	}
	return false
}

// flushProbesMax bounds the FLUSH requests Linux's FUSE may send a
// daemon that answers them ENOSYS: one per thread closing a file before
// the first answer arrives.
const flushProbesMax = 8

// flushWhy explains a difference in FLUSH requests on Linux's FUSE.
const flushWhy = "Linux's FUSE sends FLUSH on close(2) until LayerFS first answers one ENOSYS, then no more; each thread that closes a file before that answer arrives sends one, so the count (1 to a few) is the threads' timing, not the work"

// flushExplains explains a difference in a cell's FUSE requests that is
// Linux's FUSE learning that LayerFS does not flush (flushWhy): the FLUSH
// count itself, when on every Linux target each sample's is 1 to
// flushProbesMax; or the total, when without those FLUSH requests it
// agrees (or differs only as kernelsExplain explains). gVisor's FUSE
// gets 0 from LayerFS and sends a FLUSH per close: its counts stay as
// they are.
func (r *Report) flushExplains(byTarget map[string][]*manifests.Sample, names []string, key string) string {
	if key != "fuseRequests" && key != "fuseRequests.FLUSH" || len(names) != len(r.Targets) {
		return ""
	}
	linux := map[string]bool{}
	for i, t := range r.Targets {
		linux[names[i]] = t.FUSE != manifests.FUSEGVisor
		for _, s := range byTarget[names[i]] {
			if n := s.FUSERequests["FLUSH"]; linux[names[i]] && s.Status != manifests.StatusIneligible && (n < 1 || n > flushProbesMax) {
				return ""
			}
		}
	}
	adjusted := func(s *manifests.Sample) int64 {
		n := int64(0)
		if key == "fuseRequests" {
			n = s.FUSEWork()
		} else {
			n = s.FUSERequests["FLUSH"]
		}
		if linux[s.Target] {
			n -= s.FUSERequests["FLUSH"]
		}
		return n
	}
	values := countValues(byTarget, names, func(s *manifests.Sample) string { return strconv.FormatInt(adjusted(s), 10) })
	if !valuesDiffer(values) {
		return flushWhy
	}
	if why := r.kernelsExplain(key, values); why != "" {
		return why + "; and " + flushWhy
	}
	return ""
}

// kernelsExplain explains a difference in FUSE request counts between
// targets whose FUSE differs: which requests reach the daemon is the
// choice of the FUSE implementation (Linux's or gVisor's) and, for
// Linux's, of the kernel (readahead, attribute and entry caching, whether
// it has FUSE passthrough), not the work the body did. Counts that differ
// between one target's own samples, and every other count, stay
// unexplained.
//
// Store bytes that differ between Linux's filesystems and gVisor's, and
// agree within each, by at most storeRecordSlack, are explained too: the
// Store records each directory's size and link count as the Sandbox's
// filesystem reports them (gVisor's directories say 60 bytes and one
// link, Linux's 4096), which its encoding makes a byte or two longer or
// shorter per directory.
func (r *Report) kernelsExplain(key string, values []string) string {
	store := key == "storeBytes"
	if key != "fuseRequests" && !strings.HasPrefix(key, "fuseRequests.") && !store || len(values) != len(r.Targets) {
		return ""
	}
	byFUSE := map[string]string{} // whose FUSE: the value its targets share
	impls := map[string]bool{}
	var list []string
	for i, t := range r.Targets {
		if values[i] == NotSupported {
			continue
		}
		if t.Kernel == "" || strings.Contains(values[i], " / ") {
			return ""
		}
		fuse, text := t.Kernel, t.Name+" "+t.Kernel
		if t.FUSE == manifests.FUSEGVisor {
			fuse, text = "gVisor "+t.RuntimeVersion, t.Name+" gVisor's FUSE ("+t.gVisorText()+")"
			if store {
				text = t.Name + " gVisor's (" + t.gVisorText() + ")"
			}
		} else if store {
			text = t.Name + " Linux's (" + t.Kernel + ")"
		}
		if v, seen := byFUSE[fuse]; seen && v != values[i] {
			return "" // two targets with one FUSE disagree: not the FUSE's doing
		}
		byFUSE[fuse] = values[i]
		impls[cmp.Or(t.FUSE, manifests.FUSELinux)] = true
		list = append(list, text)
	}
	switch {
	case len(byFUSE) < 2:
		return ""
	case store && (len(impls) < 2 || !withinSlack(byFUSE, storeRecordSlack)):
		return ""
	case store:
		return "different filesystems under the Sandboxes: " + strings.Join(list, ", ") + "; the Store records each directory's size and link count as the Sandbox's filesystem reports them, and gVisor's directories say 60 bytes and one link where Linux's say 4096: a byte or two per directory"
	case len(impls) > 1:
		return "different FUSE implementation: " + strings.Join(list, ", ") + "; Linux's and gVisor's FUSE send the daemon different requests for the same work: caching, readahead, FLUSH, passthrough"
	}
	return "different kernels: " + strings.Join(list, ", ") + "; the kernel decides which requests reach the daemon: readahead, caching, FUSE passthrough"
}

// storeRecordSlack bounds the Store bytes a difference between Linux's and
// gVisor's filesystems may explain: two bytes for each of 512 directories.
const storeRecordSlack = 1024

// withinSlack says whether the values, each an integer, are all within
// slack of each other.
func withinSlack(values map[string]string, slack int64) bool {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, v := range values {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	return hi-lo <= slack
}

// obs is one sample's value of a metric: x, or for a ratio metric x over
// base.
type obs struct {
	round   int
	x, base float64
}

// observe returns m's observations in samples (one target's of one
// cell, by round): those of the samples that count and have a value.
func (m metric) observe(samples []*manifests.Sample) []obs {
	var got []obs
	for _, s := range samples {
		if s.Status != manifests.StatusOK {
			continue
		}
		o := obs{round: s.Round}
		var ok bool
		if o.x, ok = m.of(s); !ok {
			continue
		}
		if m.over != nil {
			if o.base, ok = m.over(s); !ok {
				continue
			}
		}
		got = append(got, o)
	}
	return got
}

func columns(obs []obs) (xs, bases []float64) {
	for _, o := range obs {
		xs, bases = append(xs, o.x), append(bases, o.base)
	}
	return xs, bases
}

// buildTiming is metric m over cells (the report's, or one suite's).
func (r *Report) buildTiming(idx map[string]map[string][]*manifests.Sample, names []string, m metric, resamples int, cells []CellInfo) (Timing, bool) {
	tm := Timing{Metric: m.name, Title: m.title, Unit: m.unit, Mark: m.mark}
	has := false
	bi := slices.Index(names, r.Baseline)
	perTargetRatios := make([][]float64, len(names))
	perTargetMedians := make([][]float64, len(names))
	ratioSuspects, medianSuspects := make([]int, len(names)), make([]int, len(names))
	// Each cell's columns, per target, for the intervals of the summaries
	// over cells.
	valueStrata, ratioStrata := make([]strata, len(names)), make([]strata, len(names))
	// A headline metric's geometric mean is over the cells whose
	// reference holds: their medians and columns, and the others' reasons.
	headMedians, headStrata, leftOut := make([][]float64, len(names)), make([]strata, len(names)), make([][]LeftOut, len(names))
	var suspects []suspect
	clustered := false
	for _, c := range cells {
		row := TimingRow{Cell: c.Name, Title: c.Title, Values: make([]TimingValue, len(names))}
		byRound := make([]map[int]obs, len(names))
		for i, t := range names {
			byRound[i] = map[int]obs{}
			got := m.observe(idx[c.Name][t])
			for _, o := range got {
				byRound[i][o.round] = o
			}
			v := &row.Values[i]
			v.N = len(got)
			if v.N == 0 {
				continue
			}
			med, ok := m.estimate(got)
			if !ok {
				continue
			}
			has = true
			v.MedianNs = &med
			v.Samples = m.values(got)
			if v.Clusters = stats.Clusters(v.Samples); v.Clusters != nil {
				clustered = true
			}
			perTargetMedians[i] = append(perTargetMedians[i], med)
			valueStrata[i].add(m.columns(got))
			if v.MedianCI = m.interval(got, resamples, r.Seed); v.MedianCI != nil && m.over != nil {
				v.MedianNoDifference = boolPtr(v.MedianCI.Contains(1))
			}
			why := ""
			if m.check != nil {
				why = m.check(med)
			}
			if why != "" {
				v.Suspect = true
				medianSuspects[i]++
				suspects = append(suspects, suspect{target: t, cell: c.Name, value: tm.Format(med) + intervalText(v.MedianCI, tm.bound)})
			}
			if m.headline {
				if why == "" {
					why = r.aaChecks[t][c.Name]
				}
				if why != "" {
					leftOut[i] = append(leftOut[i], LeftOut{Cell: c.Name, Why: why})
				} else {
					headMedians[i] = append(headMedians[i], med)
					headStrata[i].add(m.columns(got))
				}
			}
		}
		base := row.Values[bi]
		for i := range names {
			v := &row.Values[i]
			if v.MedianNs == nil || base.MedianNs == nil || m.withinTarget {
				continue
			}
			ratio := stats.Ratio(*v.MedianNs, *base.MedianNs)
			if math.IsNaN(ratio) || ratio <= 0 {
				continue
			}
			v.Ratio = &ratio
			perTargetRatios[i] = append(perTargetRatios[i], ratio)
			if v.Suspect || base.Suspect {
				v.RatioSuspect = true
				ratioSuspects[i]++
			}
			if i == bi {
				continue
			}
			// The rounds both have, in order.
			var these, bases []obs
			for round := range byRound[i] {
				if _, ok := byRound[bi][round]; ok {
					these = append(these, byRound[i][round])
				}
			}
			sort.Slice(these, func(a, b int) bool { return these[a].round < these[b].round })
			for _, o := range these {
				bases = append(bases, byRound[bi][o.round])
			}
			ratioStrata[i].add(m.pairedColumns(these, bases))
			if v.CI = m.ratioInterval(these, bases, resamples, r.Seed); v.CI != nil {
				v.Pairs, v.NoDifference = len(these), boolPtr(v.CI.Contains(1))
			}
		}
		if m.sparse && !slices.ContainsFunc(row.Values, func(v TimingValue) bool { return v.MedianNs != nil }) {
			continue
		}
		tm.Rows = append(tm.Rows, row)
	}
	iv := func(st strata, est stats.Estimator, combine func([]float64) float64) *stats.Interval {
		return st.interval(est, combine, resamples, r.Seed)
	}
	for i := range names {
		g := summarize(perTargetRatios[i], ratioSuspects[i], stats.GeoMean)
		if i != bi && g.Value != nil {
			g.CI = iv(ratioStrata[i], m.ratioEstimator(), stats.GeoMean)
			g.NoDifference = containsOne(g.CI)
		}
		tm.GeoMean = append(tm.GeoMean, g)
		md := summarize(perTargetMedians[i], medianSuspects[i], stats.Median)
		md.CI = iv(valueStrata[i], m.estimator(), stats.Median)
		tm.MedianOverCells = append(tm.MedianOverCells, md)
		if m.over == nil {
			continue
		}
		if !m.headline {
			vg := summarize(perTargetMedians[i], medianSuspects[i], stats.GeoMean)
			vg.CI = iv(valueStrata[i], m.estimator(), stats.GeoMean)
			vg.NoDifference = containsOne(vg.CI)
			tm.ValueGeoMean = append(tm.ValueGeoMean, vg)
			continue
		}
		vg := summarize(headMedians[i], 0, stats.GeoMean)
		vg.LeftOut = leftOut[i]
		if all := len(headMedians[i]) + len(leftOut[i]); all > 0 && float64(len(leftOut[i])) > InconclusiveShare*float64(all) {
			// Too much left out for the rest to stand for the run.
			vg.Value, vg.Inconclusive = nil, true
		} else {
			vg.CI = iv(headStrata[i], m.estimator(), stats.GeoMean)
			vg.NoDifference = containsOne(vg.CI)
		}
		tm.ValueGeoMean = append(tm.ValueGeoMean, vg)
	}
	if len(suspects) > 0 {
		tm.Notes = r.suspectNotes(idx, m, suspects)
	}
	if clustered {
		tm.Notes = append(tm.Notes, "Values marked \"clusters\" fell into separated groups: each group is shown as its median ×count instead of one median that would describe neither (the rule: "+stats.ClusterRule+"). Every sample is in the JSON report.")
	}
	return tm, has
}

// checkAA finds, per target and cell, the A/A check's verdict on the
// native reference ("" where it holds or was not taken), for the headline
// metrics to leave out the cells whose reference is unstable.
func (r *Report) checkAA(idx map[string]map[string][]*manifests.Sample) {
	r.aaChecks = map[string]map[string]string{}
	for _, t := range r.TargetNames() {
		r.aaChecks[t] = map[string]string{}
		for _, c := range r.Cells {
			got := aaMetric.observe(idx[c.Name][t])
			if len(got) == 0 {
				continue
			}
			if med, ok := aaMetric.estimate(got); ok {
				r.aaChecks[t][c.Name] = aaMetric.check(med)
			}
		}
	}
}

// summarize is combine over one target's cell values, or none.
func summarize(values []float64, suspect int, combine func([]float64) float64) Summary {
	s := Summary{Cells: len(values), Suspect: suspect}
	if v := combine(values); len(values) > 0 && !math.IsNaN(v) {
		s.Value = &v
	}
	return s
}

func containsOne(iv *stats.Interval) *bool {
	if iv == nil {
		return nil
	}
	return boolPtr(iv.Contains(1))
}

// strata are one target's cells' columns, for a summary's interval;
// short records that a cell had fewer than two rows, which leaves the
// summary without one.
type strata struct {
	cells [][][]float64
	short bool
}

func (st *strata) add(cols [][]float64) {
	if len(cols[0]) < 2 {
		st.short = true
	}
	st.cells = append(st.cells, cols)
}

func (st strata) interval(est stats.Estimator, combine func([]float64) float64, resamples int, seed uint64) *stats.Interval {
	if st.short || len(st.cells) == 0 {
		return nil
	}
	iv, err := stats.BootstrapOverStrata(st.cells, est, combine, Level, resamples, seed)
	if err != nil {
		return nil
	}
	return &iv
}

// columns are one target's observations of m in one cell, as the
// estimator takes them: x, and for a ratio metric its reference.
func (m metric) columns(got []obs) [][]float64 {
	xs, bases := columns(got)
	if m.over == nil {
		return [][]float64{xs}
	}
	return [][]float64{xs, bases}
}

// pairedColumns are a target's observations beside the baseline's of the
// same rounds, as ratioEstimator takes them.
func (m metric) pairedColumns(these, bases []obs) [][]float64 {
	return append(m.columns(these), m.columns(bases)...)
}

// values are each observation's own value: x, or for a ratio metric x
// over its reference.
func (m metric) values(got []obs) []float64 {
	out := make([]float64, len(got))
	for i, o := range got {
		out[i] = o.x
		if m.over != nil {
			out[i] = o.x / o.base
		}
	}
	return out
}

// estimator is what estimate computes, for the bootstrap.
func (m metric) estimator() stats.Estimator {
	if m.over == nil {
		return stats.OfMedian
	}
	return stats.OfPairedRatio
}

// ratioEstimator is a target's estimate over the baseline's, for the
// bootstrap over pairedColumns.
func (m metric) ratioEstimator() stats.Estimator {
	if m.over == nil {
		return stats.OfRatio
	}
	return stats.OfRatioOfPairedRatios
}

// estimate is m's value over one target's samples of one cell: their
// median, or for a ratio metric the median of each sample's own ratio
// (paired within the sample: what slows a whole sample, a noisy
// neighbour for a few seconds, cancels out); false where a ratio has no
// positive reference.
func (m metric) estimate(got []obs) (float64, bool) {
	xs, bases := columns(got)
	if m.over == nil {
		return stats.Median(xs), true
	}
	v := stats.MedianOfRatios(xs, bases)
	return v, !math.IsNaN(v)
}

// interval is the bootstrap interval of estimate, paired within each
// sample for a ratio metric; nil with fewer than two samples.
func (m metric) interval(got []obs, resamples int, seed uint64) *stats.Interval {
	if len(got) < 2 {
		return nil
	}
	xs, bases := columns(got)
	var iv stats.Interval
	var err error
	if m.over == nil {
		iv, err = stats.BootstrapMedian(xs, Level, resamples, seed)
	} else {
		iv, err = stats.BootstrapPairedRatio(xs, bases, Level, resamples, seed)
	}
	if err != nil {
		return nil
	}
	return &iv
}

// ratioInterval is the bootstrap interval of one target's estimate over
// the baseline's, from the rounds both have (these and bases, paired by
// round): the ratio of medians, or for a ratio metric the ratio of the two
// targets' paired ratios; nil with fewer than two rounds.
func (m metric) ratioInterval(these, bases []obs, resamples int, seed uint64) *stats.Interval {
	if len(these) < 2 {
		return nil
	}
	xs, xbase := columns(these)
	ys, ybase := columns(bases)
	var iv stats.Interval
	var err error
	if m.over == nil {
		iv, err = stats.BootstrapRatio(xs, ys, Level, resamples, seed)
	} else {
		iv, err = stats.BootstrapRatioOfPairedRatios(xs, xbase, ys, ybase, Level, resamples, seed)
	}
	if err != nil {
		return nil
	}
	return &iv
}

func boolPtr(b bool) *bool { return &b }

// suspect is one suspect value, for the notes.
type suspect struct{ target, cell, value string }

// suspectNotes explains a ratio metric's suspect values, one note for the
// check and one per target, each suspect cell with what its samples
// recorded about the protocol: which side went first, and how many timed
// windows started before write-back had drained.
func (r *Report) suspectNotes(idx map[string]map[string][]*manifests.Sample, m metric, suspects []suspect) []string {
	notes := []string{fmt.Sprintf("Checked in every cell: %s. A cell's median that fails is printed marked \"%s\", "+
		"and so is every ratio between targets that divides it. The native run may have met write-back from earlier work, memory freed long before, a cold directory, or a different placement on disk: "+
		"check those samples' barriers (phases[].barrier: dirty and write-back pages, drained, the prefault) and which side went first (first).",
		m.rule, m.mark)}
	byTarget := map[string][]string{}
	for _, sus := range suspects {
		t, cell := sus.target, sus.cell
		var n, nativeFirst, undrained int
		for _, s := range idx[cell][t] {
			if s.Status != manifests.StatusOK {
				continue
			}
			n++
			if s.First == manifests.SideNative || s.First == manifests.SideNativeRepeat {
				nativeFirst++
			}
			for _, ph := range s.Phases {
				if ph.Kind == manifests.PhaseTimed && ph.Barrier != nil && !ph.Barrier.Drained && !ph.Barrier.Unmeasured {
					undrained++
				}
			}
		}
		line := cell + " " + sus.value
		if n > 0 {
			line += fmt.Sprintf(" (a native run first in %d of %s; %s undrained)", nativeFirst, plural(n, "sample"), plural(undrained, "timed window"))
		}
		byTarget[t] = append(byTarget[t], line)
	}
	for _, t := range r.TargetNames() {
		if lines := byTarget[t]; len(lines) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %s in %s.", t, m.mark, strings.Join(lines, "; ")))
		}
	}
	return notes
}

// plural writes "1 timed window", "2 timed windows", "no timed window".
func plural(n int, what string) string {
	switch n {
	case 0:
		return "no " + what
	case 1:
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// FUSE transports in the order the report lists them.
var fuseTransports = []string{"uring", "dev"}

// noteTransports fills each target's FUSE transports from its samples and
// notes where they differ: between one target's samples, and between the
// targets a ratio compares, because what a FUSE request costs depends on
// the transport that carries it.
func (r *Report) noteTransports(byTarget map[string][]*manifests.Sample) {
	var seen []string // each target's transports, joined
	var parts []string
	for i := range r.Targets {
		t := &r.Targets[i]
		count := map[string]int{}
		for _, s := range byTarget[t.Name] {
			if s.FUSETransport != "" {
				count[s.FUSETransport]++
			}
		}
		var mix []string
		for _, ft := range fuseTransports {
			if count[ft] > 0 {
				t.FUSETransports = append(t.FUSETransports, ft)
				mix = append(mix, fmt.Sprintf("%s over %s", plural(count[ft], "sample"), ft))
			}
		}
		if len(t.FUSETransports) == 0 {
			continue
		}
		if len(t.FUSETransports) > 1 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s's samples were served by both FUSE transports (%s): its medians mix two costs per FUSE request.", t.Name, strings.Join(mix, ", ")))
		}
		if t.FUSEURing == manifests.FUSEURingOn && count["dev"] > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: enable_uring was on, yet %s used /dev/fuse: LayerFS fell back (the kernel refused io_uring for that mount, or the parameter changed during the run; each sample's transport is in samples.jsonl).", t.Name, plural(count["dev"], "sample")))
		}
		transports := strings.Join(t.FUSETransports, " / ")
		if !slices.Contains(seen, transports) {
			seen = append(seen, transports)
		}
		parts = append(parts, t.Name+" "+transports)
	}
	if len(seen) > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("The targets did not all use the same FUSE transport (%s): FUSE over io_uring and /dev/fuse differ in what each request costs, "+
			"so the ratios between these targets include the transport, not only the platform.", strings.Join(parts, ", ")))
	}
}

// noteBarriers counts, per target, the timed windows its samples recorded
// and those that started before the kernel's dirty pages had drained, and
// notes the latter: write-back from earlier work may have landed in them.
func (r *Report) noteBarriers(byTarget map[string][]*manifests.Sample) {
	for i := range r.Targets {
		t := &r.Targets[i]
		side := map[string]int{}
		var cellsHit []string
		for _, s := range byTarget[t.Name] { // in round order
			if s.Status != manifests.StatusOK {
				continue
			}
			for _, ph := range s.Phases {
				if ph.Kind != manifests.PhaseTimed || ph.Barrier == nil {
					continue
				}
				t.TimedWindows++
				if !ph.Barrier.Drained && !ph.Barrier.Unmeasured {
					t.UndrainedWindows++
					side[ph.Side]++
					cellsHit = append(cellsHit, s.Cell)
				}
			}
		}
		if t.UndrainedWindows == 0 {
			continue
		}
		sort.Strings(cellsHit)
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d of %d timed windows started before the kernel's dirty pages had drained (phases[].barrier.drained false; LayerFS %d, native %d; in %s): "+
			"write-back from earlier work may have landed in them.", t.Name, t.UndrainedWindows, t.TimedWindows, side[manifests.SideLayerFS], side[manifests.SideNative], strings.Join(slices.Compact(cellsHit), ", ")))
	}
}

// noteRestarts says, per target, how many execs its Engine could not start
// and the runner started again: they never ran, so no timing or count holds
// them, but they say the Engine was struggling.
func (r *Report) noteRestarts(byTarget map[string][]*manifests.Sample) {
	for _, t := range r.Targets {
		n := 0
		var cellsHit []string
		for _, s := range byTarget[t.Name] {
			if s.EngineRestarts > 0 {
				n += s.EngineRestarts
				cellsHit = append(cellsHit, s.Cell)
			}
		}
		if n == 0 {
			continue
		}
		sort.Strings(cellsHit)
		r.Notes = append(r.Notes, fmt.Sprintf("%s: its Engine could not start %s (in %s); the runner started each again (samples[].engineRestarts). They never ran, so no timing holds them.",
			t.Name, plural(n, "exec"), strings.Join(slices.Compact(cellsHit), ", ")))
	}
}

// noteSingleSamples says where a value rests on a single sample, which has
// no interval.
func (r *Report) noteSingleSamples() {
	var single []string
	values := 0
	for _, tm := range r.Timings {
		if tm.Metric != metrics[0].name {
			continue
		}
		for _, row := range tm.Rows {
			for i, v := range row.Values {
				if v.N > 0 {
					values++
				}
				if v.N == 1 {
					single = append(single, r.Targets[i].Name+" "+row.Cell)
				}
			}
		}
	}
	switch {
	case len(single) == 0:
	case len(single) == values:
		r.Notes = append(r.Notes, "Every timing here rests on a single sample per cell and target, and a single sample has no interval: nothing shows which differences are noise. Run with --samples 5 or more.")
	default:
		sort.Strings(single)
		verb := "rests"
		if len(single) > 1 {
			verb = "rest"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("A single sample has no interval: %s %s on one sample that counts, so its values stand bare. Run with --samples 5 or more.", strings.Join(single, ", "), verb))
	}
}

// TargetNames returns the targets' names in report order.
func (r *Report) TargetNames() []string {
	names := make([]string, len(r.Targets))
	for i, t := range r.Targets {
		names[i] = t.Name
	}
	return names
}

// Multi reports whether any value is a median of more than one sample.
func (r *Report) Multi() bool {
	for _, tm := range r.Timings {
		for _, row := range tm.Rows {
			for _, v := range row.Values {
				if v.N > 1 {
					return true
				}
			}
		}
	}
	return false
}

// ErrFormat is returned for a format Write does not know.
var ErrFormat = errors.New("unknown report format")

// Formats lists the formats Write renders.
var Formats = []string{"md", "html", "json", "csv"}
