// Package report turns a run's samples (and its pins) into the comparison
// the twelve-cell reports make: exact counts first, per cell and target,
// with every difference between targets flagged, because timings only
// compare the same work; then timings, each with its ratio to a baseline
// target and the geometric mean of those ratios over the cells, and with
// several samples, medians and bootstrap 95% intervals.
//
// Build makes a Report, a plain data model; Write renders it as Markdown,
// HTML (one self-contained page, inline SVG charts, no script), JSON or CSV.
// Every rendering is deterministic, and each has a golden file.
package report

import (
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

// FormatVersion is the version of the JSON and CSV reports.
const FormatVersion = 1

// Input is one run's results.
type Input struct {
	Source  string             // where they were read from, for messages
	Pins    *manifests.RunPins // nil when the run left no pins file
	Samples []manifests.Sample // as ReadSamples returned them
}

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
const Level = 0.95

// Report is the comparison, ready to render.
type Report struct {
	FormatVersion int          `json:"formatVersion"`
	Baseline      string       `json:"baseline"`
	Targets       []TargetInfo `json:"targets"`
	Runs          []RunInfo    `json:"runs"`
	Cells         []CellInfo   `json:"cells"`
	Level         float64      `json:"level"`
	Seed          uint64       `json:"seed"`
	// Counts has one row per cell and count; each row's Values follow Targets.
	Counts      []CountRow   `json:"counts"`
	Differences []Difference `json:"differences"`
	Problems    []Problem    `json:"problems"` // failed and ineligible samples
	Timings     []Timing     `json:"timings"`
	Notes       []string     `json:"notes"`
}

// TargetInfo is what the report knows about one target.
type TargetInfo struct {
	Name        string `json:"name"`
	RunID       string `json:"runId"`
	Engine      string `json:"engine,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	CPUs        int    `json:"cpus,omitempty"`
	MemoryBytes int64  `json:"memoryBytes,omitempty"`
	Emulated    bool   `json:"emulated"`
	Transport   string `json:"transport,omitempty"` // how the runner reached the Engine
	Samples     int    `json:"samples"`             // samples read
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
	Start               time.Time         `json:"start,omitzero"`
	End                 time.Time         `json:"end,omitzero"`
	LockWaitMaxNs       int64             `json:"lockWaitMaxNs"`
	Load1Min            float64           `json:"load1Min"`
	Load1Max            float64           `json:"load1Max"`
}

// CellInfo names a cell.
type CellInfo struct {
	Name  string `json:"name"`
	Title string `json:"title"`
}

// CountRow is one exact count of one cell on every target.
type CountRow struct {
	Cell   string   `json:"cell"`
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
func (r *Report) Explained() bool {
	for _, d := range r.Differences {
		if d.Why == "" {
			return false
		}
	}
	return true
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
	// Unit is UnitNs for durations, or UnitTimes for a dimensionless ratio
	// (layerfsOverNative), whose "medianNs" values are then plain ratios.
	Unit string      `json:"unit"`
	Rows []TimingRow `json:"rows"`
	// GeoMean is, per target, the geometric mean over cells of the ratio to
	// the baseline, over the cells where both have a value.
	GeoMean []Summary `json:"geoMean"`
	// MedianOverCells is, per target, the median over cells of the cell
	// medians (ns): the "fixed overhead per exec" is this for
	// execOverheadNs.
	MedianOverCells []Summary `json:"medianOverCells"`
}

// TimingRow is one cell's values of one Timing, per target.
type TimingRow struct {
	Cell   string        `json:"cell"`
	Values []TimingValue `json:"values"`
}

// TimingValue is one target's value in one cell.
type TimingValue struct {
	N        int             `json:"n"`                  // samples that count (status ok)
	MedianNs *float64        `json:"medianNs,omitempty"` // absent when N is 0
	Ratio    *float64        `json:"ratio,omitempty"`    // median / the baseline's median
	CI       *stats.Interval `json:"ci,omitempty"`       // bootstrap interval of Ratio, with 2 or more paired rounds
	Pairs    int             `json:"pairs,omitempty"`    // rounds paired with the baseline for CI
}

// Summary is one target's summary value over cells.
type Summary struct {
	Value *float64 `json:"value,omitempty"`
	Cells int      `json:"cells"` // how many cells it is over
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

// The timings, in order.
var timingNames = []struct {
	metric, title, unit string
	get                 func(*manifests.Sample) (float64, bool)
}{
	{"commandNs", "Command time on the Sandbox's own clock", UnitNs, func(s *manifests.Sample) (float64, bool) { return float64(s.CommandNs), true }},
	{"execWallNs", "Exec wall time on the runner side", UnitNs, func(s *manifests.Sample) (float64, bool) { return float64(s.ExecWallNs), true }},
	{"execOverheadNs", "Per-exec overhead (exec wall minus command time)", UnitNs, func(s *manifests.Sample) (float64, bool) { return float64(s.ExecOverheadNs), true }},
	{"mountNs", "Mount", UnitNs, func(s *manifests.Sample) (float64, bool) { return float64(s.MountNs), true }},
	{"commitNs", "Commit", UnitNs, func(s *manifests.Sample) (float64, bool) { return float64(s.CommitNs), true }},
	{"unmountNs", "Unmount", UnitNs, func(s *manifests.Sample) (float64, bool) { return float64(s.UnmountNs), true }},
	{"nativeNs", "Native reference: the same body on a plain directory, no LayerFS", UnitNs, func(s *manifests.Sample) (float64, bool) {
		if s.NativeNs == nil {
			return 0, false
		}
		return float64(*s.NativeNs), true
	}},
	// The ratio a target's own disk cannot skew: targets keep their
	// Sandboxes in different places, and where a directory lands changes
	// what creating files costs there (see the runner's scratch), so
	// command times of create-heavy cells differ between targets on one
	// machine for reasons that are not the platform's. LayerFS's cost
	// over native in the same Sandbox does not.
	{"layerfsOverNative", "LayerFS over native: command time divided by the native reference, per sample", UnitTimes, func(s *manifests.Sample) (float64, bool) {
		if s.NativeNs == nil || *s.NativeNs <= 0 {
			return 0, false
		}
		return float64(s.CommandNs) / float64(*s.NativeNs), true
	}},
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
	r := &Report{FormatVersion: FormatVersion, Level: Level, Differences: []Difference{}, Problems: []Problem{}, Notes: []string{}}
	byTarget := map[string][]*manifests.Sample{}
	targetRun := map[string]int{}
	seen := map[string]bool{}
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
		run := RunInfo{Source: in.Source, RunID: first.RunID, BundleID: first.BundleID, Load1Min: math.Inf(1)}
		if p := in.Pins; p != nil {
			run.Pinned = true
			run.ImageID, run.RunnerSHA256, run.StandinSHA256 = p.ImageID.String(), p.RunnerSHA256.String(), p.StandinSHA256.String()
			run.StoreProfile, run.ConstructionWorkers, run.Tools = p.StoreProfile, p.ConstructionWorkers, p.Tools
			run.SamplesPerCell, run.Seed, run.Start, run.End = p.Samples, p.Seed, p.Start, p.End
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
			c, err := cells.Lookup(s.Cell)
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
			ti := TargetInfo{Name: t, RunID: first.RunID, Samples: len(byTarget[t])}
			if in.Pins != nil {
				if tp, ok := in.Pins.Target(t); ok {
					ti.Engine, ti.Kernel, ti.CPUs, ti.MemoryBytes, ti.Emulated = tp.Engine, tp.Kernel, tp.CPUs, tp.MemoryBytes, tp.Emulated
					ti.Transport = tp.Transport
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
	for _, n := range cells.Names() {
		if seen[n] {
			r.Cells = append(r.Cells, CellInfo{Name: n, Title: cells.All[n].Title})
		}
	}
	for _, t := range r.Targets {
		if t.Emulated {
			r.Notes = append(r.Notes, fmt.Sprintf("%s runs under CPU emulation: its timings describe the emulator, so it is a pass/fail and exact-counts target.", t.Name))
		}
		if t.Transport != "" && t.Transport != "socket" {
			r.Notes = append(r.Notes, fmt.Sprintf("%s's Engine was reached through %s, not a socket: its exec wall time and per-exec overhead include that transport.", t.Name, t.Transport))
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
			if s.Status != manifests.StatusOK {
				r.Problems = append(r.Problems, Problem{Target: t, Cell: s.Cell, Round: s.Round, Status: string(s.Status), Reason: s.Reason, Detail: s.VerifierDetail})
			}
		}
	}
	sort.Slice(r.Problems, func(i, j int) bool {
		a, b := r.Problems[i], r.Problems[j]
		return a.Cell+"\x00"+a.Target+"\x00"+fmt.Sprint(a.Round) < b.Cell+"\x00"+b.Target+"\x00"+fmt.Sprint(b.Round)
	})

	r.buildCounts(idx, names)
	for _, tn := range timingNames {
		tm, ok := r.buildTiming(idx, names, tn.metric, tn.title, tn.get, resamples)
		if ok {
			tm.Unit = tn.unit
			r.Timings = append(r.Timings, tm)
		}
	}
	return r, nil
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
			values := make([]string, len(names))
			for i, t := range names {
				var distinct []string
				for _, s := range idx[c.Name][t] {
					if v := countValue(s, key); !slices.Contains(distinct, v) {
						distinct = append(distinct, v)
					}
				}
				values[i] = strings.Join(distinct, " / ")
			}
			differs := false
			for _, v := range values {
				if v != values[0] || v == "" || strings.Contains(v, " / ") {
					differs = true
				}
			}
			if differs {
				d := Difference{Cell: c.Name, Count: key, Values: map[string]string{}}
				for i, t := range names {
					d.Values[t] = values[i]
				}
				d.Why = r.kernelsExplain(key, values)
				r.Differences = append(r.Differences, d)
			}
			// Opcodes are in the differences and the JSON and CSV only:
			// a row per opcode would bury the table.
			if !strings.HasPrefix(key, "fuseRequests.") {
				r.Counts = append(r.Counts, CountRow{Cell: c.Name, Count: key, Values: values, Differs: differs})
			}
		}
	}
}

// kernelsExplain explains a difference in FUSE request counts between
// targets that run different kernels: which requests reach the daemon is
// the kernel's choice (readahead, attribute and entry caching, whether it
// has FUSE passthrough), not the work the body did. Counts that differ
// between one target's own samples, and every other count, stay
// unexplained.
func (r *Report) kernelsExplain(key string, values []string) string {
	if key != "fuseRequests" && !strings.HasPrefix(key, "fuseRequests.") || len(values) != len(r.Targets) {
		return ""
	}
	byKernel := map[string]string{} // kernel: the value its targets share
	var list []string
	for i, t := range r.Targets {
		if t.Kernel == "" || strings.Contains(values[i], " / ") {
			return ""
		}
		if v, seen := byKernel[t.Kernel]; seen && v != values[i] {
			return "" // two targets on one kernel disagree: not the kernel's doing
		}
		byKernel[t.Kernel] = values[i]
		list = append(list, t.Name+" "+t.Kernel)
	}
	if len(byKernel) < 2 {
		return ""
	}
	return "different kernels: " + strings.Join(list, ", ") + "; the kernel decides which requests reach the daemon: readahead, caching, FUSE passthrough"
}

func (r *Report) buildTiming(idx map[string]map[string][]*manifests.Sample, names []string, metric, title string,
	get func(*manifests.Sample) (float64, bool), resamples int) (Timing, bool) {
	tm := Timing{Metric: metric, Title: title}
	has := false
	perTargetRatios := make([][]float64, len(names))
	perTargetMedians := make([][]float64, len(names))
	for _, c := range r.Cells {
		row := TimingRow{Cell: c.Name, Values: make([]TimingValue, len(names))}
		byRound := make([]map[int]float64, len(names))
		for i, t := range names {
			byRound[i] = map[int]float64{}
			var xs []float64
			for _, s := range idx[c.Name][t] {
				if s.Status != manifests.StatusOK {
					continue
				}
				if v, ok := get(s); ok {
					xs = append(xs, v)
					byRound[i][s.Round] = v
				}
			}
			row.Values[i].N = len(xs)
			if len(xs) > 0 {
				has = true
				m := stats.Median(xs)
				row.Values[i].MedianNs = &m
				perTargetMedians[i] = append(perTargetMedians[i], m)
			}
		}
		bi := slices.Index(names, r.Baseline)
		base := row.Values[bi].MedianNs
		for i := range names {
			v := &row.Values[i]
			if v.MedianNs == nil || base == nil {
				continue
			}
			ratio := stats.Ratio(*v.MedianNs, *base)
			if math.IsNaN(ratio) || ratio <= 0 {
				continue
			}
			v.Ratio = &ratio
			perTargetRatios[i] = append(perTargetRatios[i], ratio)
			if i == bi {
				continue
			}
			var xs, bs []float64
			rounds := make([]int, 0, len(byRound[i]))
			for round := range byRound[i] {
				if _, ok := byRound[bi][round]; ok {
					rounds = append(rounds, round)
				}
			}
			sort.Ints(rounds)
			for _, round := range rounds {
				xs, bs = append(xs, byRound[i][round]), append(bs, byRound[bi][round])
			}
			if len(xs) >= 2 {
				if iv, err := stats.BootstrapRatio(xs, bs, Level, resamples, r.Seed); err == nil {
					v.CI, v.Pairs = &iv, len(xs)
				}
			}
		}
		tm.Rows = append(tm.Rows, row)
	}
	for i := range names {
		g := Summary{Cells: len(perTargetRatios[i])}
		if gm := stats.GeoMean(perTargetRatios[i]); !math.IsNaN(gm) {
			g.Value = &gm
		}
		tm.GeoMean = append(tm.GeoMean, g)
		m := Summary{Cells: len(perTargetMedians[i])}
		if md := stats.Median(perTargetMedians[i]); !math.IsNaN(md) {
			m.Value = &md
		}
		tm.MedianOverCells = append(tm.MedianOverCells, m)
	}
	return tm, has
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
