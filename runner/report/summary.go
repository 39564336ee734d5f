package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sealbench/sealbench/manifests"
)

// Overview is the answer first: what ran, whether every count matched,
// the headline figures per target with their intervals, which
// differences the samples show and which they do not, and what makes the
// targets hard to compare. Every format opens with it.
type Overview struct {
	Bundles        []string `json:"bundles"` // in the order of the runs
	Runs           int      `json:"runs"`
	Targets        []string `json:"targets"`
	Cells          int      `json:"cells"`
	Samples        int      `json:"samples"`        // read
	SamplesOK      int      `json:"samplesOk"`      // that count (status ok)
	SamplesPerCell int      `json:"samplesPerCell"` // the most any run planned; 0 without pins
	// CountsMatch is true when every count is equal across targets (and
	// across each target's samples) in every cell.
	CountsMatch bool `json:"countsMatch"`
	// DifferentWork are the cells with a difference nothing explains: their
	// timings do not compare the same work. KernelOnly are those whose
	// differences are all in FUSE requests between different kernels (or
	// FUSE implementations: Between says which).
	DifferentWork []string `json:"differentWork"`
	KernelOnly    []string `json:"kernelOnly"`
	// Between is what the explained differences are between: "different
	// kernels", "different FUSE implementations", or both.
	Between string `json:"between,omitempty"`
	// StoreExplained says an explained difference is in Store bytes
	// (between Linux's filesystems and gVisor's), not FUSE requests alone.
	StoreExplained bool `json:"storeExplained,omitempty"`
	// FlushTiming says an explained difference is in FLUSH requests on
	// Linux's FUSE, which vary with the threads' timing (flushWhy).
	FlushTiming bool `json:"flushTiming,omitempty"`
	Problems    int  `json:"problems"` // failed samples
	// Unsupported counts the ineligible samples: cells a target cannot
	// run, not failures.
	Unsupported int `json:"unsupported,omitempty"`
	// Warnings say what differs between the targets beyond the platform
	// itself (CPUs, memory, kernel, emulation, transports), before any
	// timing is read.
	Warnings  []string   `json:"warnings"`
	Headlines []Headline `json:"headlines"`
	// Extended are the cells the precision rule gave more rounds.
	Extended []Extension `json:"extended,omitempty"`
}

// Headline is one target's figures over all cells.
type Headline struct {
	Target   string `json:"target"`
	Baseline bool   `json:"baseline"`
	// LayerFSOverNative is the geometric mean over cells of LayerFS over
	// native; absent when the run took no native reference.
	LayerFSOverNative *Summary `json:"layerfsOverNative,omitempty"`
	// CommandVsBaseline is the geometric mean over cells of the command
	// time's ratio to the baseline's; absent for the baseline.
	CommandVsBaseline *Summary `json:"commandVsBaseline,omitempty"`
	// ExecOverheadNs is the median over cells of the per-exec overhead.
	ExecOverheadNs *Summary `json:"execOverheadNs,omitempty"`
	// ReadyNs is the median over cells of the time to a usable Sandbox
	// (Sample.ReadyNs): cold, or a claim on a warm pool of WarmPool
	// Sandboxes; absent in runs that did not record it.
	ReadyNs  *Summary `json:"readyNs,omitempty"`
	WarmPool int      `json:"warmPool,omitempty"`
	// Transport is how the runner reached the target's Engine where that
	// was not a local socket ("ssh", "msb-exec"): ExecOverheadNs includes
	// it.
	Transport string `json:"transport,omitempty"`
	// Faster and Slower are the cells whose command time's interval of the
	// ratio to the baseline lies wholly below or above 1.0 (a difference
	// shown); Same those whose interval includes 1.0 (none shown); Bare
	// those without an interval (a single round).
	Faster []string `json:"faster,omitempty"`
	Slower []string `json:"slower,omitempty"`
	Same   []string `json:"same,omitempty"`
	Bare   []string `json:"bare,omitempty"`
	// NativeSame are the cells whose LayerFS over native interval
	// includes 1.0: no cost over native shown.
	NativeSame []string `json:"nativeSame,omitempty"`
	// AA is the A/A check's summary: the protocol's own noise on this
	// target; absent when no sample timed the native reference twice.
	AA *AASummary `json:"aa,omitempty"`
	// Suites are, in a report of more than one suite, the two geometric
	// means over each suite's cells alone (Timing.Suites).
	Suites []SuiteHeadline `json:"suites,omitempty"`
}

// SuiteHeadline is a target's headline ratios over one suite's cells.
type SuiteHeadline struct {
	Suite             string   `json:"suite"`
	LayerFSOverNative *Summary `json:"layerfsOverNative,omitempty"`
	CommandVsBaseline *Summary `json:"commandVsBaseline,omitempty"`
}

// AASummary is one target's A/A check over its cells.
type AASummary struct {
	// Cells is how many cells have an A/A median; WithinPct the largest
	// distance of one of those medians from 1.0 among the cells that
	// pass, in percent: "A/A within ±4%".
	Cells     int     `json:"cells"`
	WithinPct float64 `json:"withinPct"`
	// Outside are the cells whose A/A median is outside 0.9-1.1.
	Outside []LeftOut `json:"outside,omitempty"`
}

// buildOverview fills r.Summary from what Build made.
func (r *Report) buildOverview(samples int) {
	o := Overview{Runs: len(r.Runs), Targets: r.TargetNames(), Cells: len(r.Cells), Samples: samples,
		Bundles: []string{}, DifferentWork: []string{}, KernelOnly: []string{}, Warnings: []string{}, Headlines: []Headline{}}
	for _, run := range r.Runs {
		if !slices.Contains(o.Bundles, run.BundleID) {
			o.Bundles = append(o.Bundles, run.BundleID)
		}
		o.SamplesPerCell = max(o.SamplesPerCell, run.SamplesPerCell)
	}
	o.SamplesOK = samples - len(r.Problems) - len(r.Unsupported)
	o.Problems, o.Unsupported = len(r.Problems), len(r.Unsupported)
	o.Between = r.between()
	o.CountsMatch = len(r.Differences) == 0
	unexplained := map[string]bool{}
	for _, d := range r.Differences {
		switch {
		case d.Why == "":
			unexplained[d.Cell] = true
		case d.Count == "storeBytes":
			o.StoreExplained = true
		case strings.Contains(d.Why, flushWhy):
			o.FlushTiming = true
		}
	}
	for _, c := range r.Cells {
		explained := false
		for _, d := range r.Differences {
			if d.Cell == c.Name {
				explained = true
			}
		}
		switch {
		case unexplained[c.Name]:
			o.DifferentWork = append(o.DifferentWork, c.Name)
		case explained:
			o.KernelOnly = append(o.KernelOnly, c.Name)
		}
	}
	o.Warnings = r.comparability()

	cmd, lon, over, aa, ready := r.timing("commandNs"), r.timing("layerfsOverNative"), r.timing("execOverheadNs"), r.timing(aaMetric.name), r.timing("readyNs")
	for i, t := range r.Targets {
		h := Headline{Target: t.Name, Baseline: t.Name == r.Baseline}
		if aa != nil {
			h.AA = aaSummary(aa, i)
		}
		if lon != nil {
			h.LayerFSOverNative = present(lon.ValueGeoMean[i])
			for _, row := range lon.Rows {
				if v := row.Values[i]; v.MedianNoDifference != nil && *v.MedianNoDifference {
					h.NativeSame = append(h.NativeSame, row.Cell)
				}
			}
		}
		if over != nil {
			h.ExecOverheadNs = present(over.MedianOverCells[i])
		}
		if ready != nil {
			h.ReadyNs, h.WarmPool = present(ready.MedianOverCells[i]), t.WarmPool
		}
		if tr := t.transportText(); tr != "socket" {
			h.Transport = tr
		}
		h.Suites = suiteHeadlines(r.Suites, lon, cmd, i, h.Baseline)
		if cmd != nil && !h.Baseline {
			h.CommandVsBaseline = present(cmd.GeoMean[i])
			for _, row := range cmd.Rows {
				v := row.Values[i]
				switch {
				case v.Ratio == nil:
				case v.CI == nil:
					h.Bare = append(h.Bare, row.Cell)
				case v.CI.Contains(1):
					h.Same = append(h.Same, row.Cell)
				case v.CI.High < 1:
					h.Faster = append(h.Faster, row.Cell)
				default:
					h.Slower = append(h.Slower, row.Cell)
				}
			}
		}
		o.Headlines = append(o.Headlines, h)
	}
	r.Summary = o
}

// suiteHeadlines are target i's headline ratios per suite, from the
// timings' per-suite summaries; none in a report of one suite.
func suiteHeadlines(suites []SuiteInfo, lon, cmd *Timing, i int, baseline bool) []SuiteHeadline {
	var out []SuiteHeadline
	for _, su := range suites {
		sh := SuiteHeadline{Suite: su.Name}
		if lon != nil {
			if st := lon.suite(su.Name); st != nil && st.ValueGeoMean != nil {
				sh.LayerFSOverNative = present(st.ValueGeoMean[i])
			}
		}
		if cmd != nil && !baseline {
			if st := cmd.suite(su.Name); st != nil {
				sh.CommandVsBaseline = present(st.GeoMean[i])
			}
		}
		if sh.LayerFSOverNative != nil || sh.CommandVsBaseline != nil {
			out = append(out, sh)
		}
	}
	return out
}

// suite is the timing's summaries over suite's cells; nil in a report of
// one suite.
func (tm *Timing) suite(name string) *SuiteTiming {
	for i := range tm.Suites {
		if tm.Suites[i].Suite == name {
			return &tm.Suites[i]
		}
	}
	return nil
}

// aaSummary is target i's A/A check over the cells of the A/A timing.
func aaSummary(aa *Timing, i int) *AASummary {
	var a AASummary
	for _, row := range aa.Rows {
		v := row.Values[i]
		if v.MedianNs == nil {
			continue
		}
		a.Cells++
		if why := aaMetric.check(*v.MedianNs); why != "" {
			a.Outside = append(a.Outside, LeftOut{Cell: row.Cell, Why: why})
			continue
		}
		a.WithinPct = max(a.WithinPct, math.Abs(*v.MedianNs-1)*100)
	}
	if a.Cells == 0 {
		return nil
	}
	return &a
}

// Text is the A/A check in a few words: "within ±4% in 12 cells", and
// the cells outside 0.9-1.1 with their medians.
func (a *AASummary) Text() string {
	if a == nil {
		return ""
	}
	in := a.Cells - len(a.Outside)
	text := ""
	if in > 0 {
		text = fmt.Sprintf("within ±%s%% in %s", strconv.FormatFloat(math.Ceil(a.WithinPct), 'f', 0, 64), plural(in, "cell"))
	}
	if len(a.Outside) > 0 {
		var cells []string
		for _, o := range a.Outside {
			cells = append(cells, o.Cell+" "+strings.TrimPrefix(o.Why, "reference unstable: A/A "))
		}
		text = joinNonEmpty("; ", text, "outside 0.9-1.1 in "+strings.Join(cells, ", "))
	}
	return text
}

// present is s, or nil when it has no value and is not an inconclusive
// headline (which says why it has none).
func present(s Summary) *Summary {
	if s.Value == nil && !s.Inconclusive {
		return nil
	}
	return &s
}

// timing returns the timing of metric, or nil when the run has none.
func (r *Report) timing(metric string) *Timing {
	for i := range r.Timings {
		if r.Timings[i].Metric == metric {
			return &r.Timings[i]
		}
	}
	return nil
}

// comparability says, for each property the pins carry, where the targets
// differ: CPUs, memory, kernel, emulation, the Engine's transport and the
// FUSE transport. A target that does not know a property is left out of
// that comparison.
func (r *Report) comparability() []string {
	warnings := []string{}
	if len(r.Targets) < 2 {
		for _, t := range r.Targets {
			if t.Emulated {
				warnings = append(warnings, t.Name+" runs under CPU emulation: its timings are the emulator's.")
			}
		}
		return warnings
	}
	differ := func(what, consequence string, of func(TargetInfo) string) {
		var parts, seen []string
		for _, t := range r.Targets {
			v := of(t)
			if v == "" {
				continue
			}
			parts = append(parts, t.Name+" "+v)
			if !slices.Contains(seen, v) {
				seen = append(seen, v)
			}
		}
		if len(seen) > 1 {
			warnings = append(warnings, fmt.Sprintf("%s (%s): %s", what, strings.Join(parts, ", "), consequence))
		}
	}
	for _, tr := range targetTraits {
		if tr.when == nil || tr.when(r.Targets) {
			differ(tr.differ, tr.means, tr.of)
		}
	}
	return warnings
}

// targetTraits are what, differing between two targets (or between a
// target's old and new run), puts more than the platform or the code into
// a ratio: each as a target's text, "" where the results do not say.
var targetTraits = []struct {
	name   string // as a comparison names it
	differ string // as the summary says it
	means  string // what the difference does to a ratio
	of     func(TargetInfo) string
	// when, if set, says whether the targets' difference in this trait
	// is worth a warning at all.
	when func([]TargetInfo) bool
}{
	{"CPUs", "CPUs differ", "a ratio between these targets includes the machines, not only the platforms.", func(t TargetInfo) string {
		if t.CPUs == 0 {
			return ""
		}
		return strconv.Itoa(t.CPUs)
	}, nil},
	{"memory", "Memory sizes differ", "the page cache each target has differs.", func(t TargetInfo) string {
		if t.MemoryBytes == 0 {
			return ""
		}
		return gib(t.MemoryBytes)
	}, nil},
	{"kernel", "Kernels differ", "the kernel decides which FUSE requests reach the daemon and what each costs.", func(t TargetInfo) string { return t.Kernel }, nil},
	{"FUSE implementation", "FUSE implementations differ", "gVisor's Sentry serves a Sandbox's system calls and its FUSE itself: a ratio includes gVisor, and its FUSE sends other requests.", func(t TargetInfo) string {
		if t.FUSE != manifests.FUSEGVisor {
			return t.FUSE
		}
		return "gVisor's (" + t.gVisorText() + ")"
	}, nil},
	{"emulation", "Emulation differs", "an emulated target's timings are the emulator's: compare its counts, not its times.", func(t TargetInfo) string {
		if t.Engine == "" {
			return ""
		}
		if t.Emulated {
			return "emulated"
		}
		return "native"
	}, nil},
	// An Engine reached over a socket leaves its transport empty.
	{"Engine transport", "Engine transports differ", "exec wall time and per-exec overhead include the transport.", func(t TargetInfo) string {
		if t.Engine == "" {
			return ""
		}
		if t.Transport == "" {
			return "socket"
		}
		return t.Transport
	}, nil},
	{"FUSE transport", "FUSE transports differ", "what a FUSE request costs depends on the transport that carries it.", func(t TargetInfo) string {
		return strings.Join(t.FUSETransports, " / ")
	}, nil},
	// Targets on different hosts whose kernels, CPUs and memory agree
	// are left to the traits above (which then say nothing).
	{"host", "Hosts differ in kernel, CPUs or memory", "a ratio between targets on different hosts compares the machines as well as the platforms; each host's pins are under Hosts.",
		func(t TargetInfo) string {
			if t.Engine == "" {
				return ""
			}
			return "on " + t.HostText()
		}, machinesDiffer},
}

// SignatureText says what the host found about a run's signed results, in
// a few words; "" when nobody looked.
func SignatureText(s *Signature) string {
	if s == nil {
		return ""
	}
	text := s.State
	switch s.State {
	case SignatureVerified:
		text = "signed, verified"
	case SignatureUnchecked:
		text = "signed, not checked (no key given)"
	case SignatureUnsigned:
		text = "unsigned"
	case SignatureInvalid:
		text = "signature INVALID"
	}
	if s.Key != "" {
		text += " (key " + short(s.Key) + ")"
	}
	if s.Detail != "" {
		text += ": " + s.Detail
	}
	return text
}

// Signed reports whether any run's signature was looked at.
func (r *Report) Signed() bool {
	for _, run := range r.Runs {
		if run.Signature != nil {
			return true
		}
	}
	return false
}

// signatureLines say, per run, what the host found about its signed
// results: nothing when nobody looked at any, "not checked" for a run
// nobody looked at beside one somebody did.
func (r *Report) signatureLines() []string {
	if !r.Signed() {
		return nil
	}
	var lines []string
	for _, run := range r.Runs {
		text := SignatureText(run.Signature)
		if text == "" {
			text = "not checked"
		}
		lines = append(lines, run.RunID+": "+text)
	}
	return lines
}

// What explained differences are between (Overview.Between).
const (
	betweenKernels = "different kernels"
	betweenFUSE    = "different FUSE implementations"
)

// between says what the report's explained differences are between.
func (r *Report) between() string {
	var kernels, fuse bool
	for _, d := range r.Differences {
		switch {
		case strings.HasPrefix(d.Why, "different FUSE implementation"):
			fuse = true
		case d.Why != "" && d.Why != flushWhy:
			kernels = true
		}
	}
	switch {
	case kernels && fuse:
		return betweenKernels + " and " + betweenFUSE
	case fuse:
		return betweenFUSE
	case kernels:
		return betweenKernels
	}
	return ""
}

// countsVerdict is the summary's one line on the counts.
func (o Overview) countsVerdict() string {
	switch {
	case o.CountsMatch && len(o.Targets) == 1:
		return "every count matched across the samples of every cell."
	case o.CountsMatch:
		return "every count matched across targets in every cell: the timings compare the same work."
	case len(o.DifferentWork) == 0 && o.Between == "" && o.FlushTiming:
		return "counts differ only in FLUSH requests (" + strings.Join(o.KernelOnly, ", ") + "): " + flushWhy + "."
	case len(o.DifferentWork) == 0:
		return o.explainedVerdict()
	}
	s := "counts differ in " + strings.Join(o.DifferentWork, ", ") + ": those cells' timings do not compare the same work"
	if len(o.KernelOnly) > 0 && o.Between == "" && o.FlushTiming {
		return s + "; in " + strings.Join(o.KernelOnly, ", ") + " only FLUSH requests differ: " + flushWhy + "."
	}
	if len(o.KernelOnly) > 0 {
		what := "FUSE requests differ"
		if o.StoreExplained {
			what = "FUSE requests and Store bytes differ"
		}
		s += "; in " + strings.Join(o.KernelOnly, ", ") + " only " + what + ", between " + cmp.Or(o.Between, betweenKernels)
	}
	return s + "." + o.flushNote()
}

// explainedVerdict is countsVerdict when every difference is explained by
// what is under the targets' Sandboxes.
func (o Overview) explainedVerdict() string {
	if o.Between == betweenKernels || o.Between == "" {
		return "counts differ only in FUSE requests between targets on different kernels (" + strings.Join(o.KernelOnly, ", ") + "): the same work, different requests from the kernels." + o.flushNote()
	}
	if o.StoreExplained {
		return "counts differ only in FUSE requests and Store bytes between targets with " + o.Between + " (" + strings.Join(o.KernelOnly, ", ") + "): the same work, different requests from their FUSE and different directory records from their filesystems." + o.flushNote()
	}
	return "counts differ only in FUSE requests between targets with " + o.Between + " (" + strings.Join(o.KernelOnly, ", ") + "): the same work, different requests from their FUSE." + o.flushNote()
}

// flushNote adds to a verdict on differences that are not FLUSH's alone
// that FLUSH requests vary too, when they do.
func (o Overview) flushNote() string {
	if !o.FlushTiming {
		return ""
	}
	return " FLUSH requests vary with the threads' timing too: Linux's FUSE sends them until LayerFS first answers ENOSYS."
}

// ranText is what ran, in one line.
func (o Overview) ranText() string {
	per := ""
	if o.SamplesPerCell > 0 {
		per = ", " + plural(o.SamplesPerCell, "sample") + " per cell and target"
	}
	var notes []string
	if o.Problems > 0 {
		notes = append(notes, fmt.Sprintf("%d failed", o.Problems))
	}
	if o.Unsupported > 0 {
		notes = append(notes, fmt.Sprintf("%d not supported by this backend", o.Unsupported))
	}
	failed := ""
	if len(notes) > 0 {
		failed = " (" + strings.Join(notes, "; ") + ")"
	}
	extended := ""
	if len(o.Extended) > 0 {
		var parts []string
		for _, e := range o.Extended {
			parts = append(parts, fmt.Sprintf("%s +%d", e.Cell, e.Samples))
		}
		extended = fmt.Sprintf("; the precision rule added samples where the A/A interval was wider than %.1f: %s", manifests.AAPrecisionWidth, strings.Join(parts, ", "))
	}
	bundle := "bundle"
	if len(o.Bundles) > 1 {
		bundle = "bundles"
	}
	return fmt.Sprintf("%s %s; %s (%s); %s; %s%s%s.", bundle, strings.Join(o.Bundles, ", "), plural(len(o.Targets), "target"), strings.Join(o.Targets, ", "),
		plural(o.Cells, "cell"), plural(o.Samples, "sample"), failed, per+extended)
}

// shownText says which differences from the baseline the samples show and
// which they do not.
func (h Headline) shownText(baseline string) string {
	var parts []string
	if len(h.Faster) > 0 {
		parts = append(parts, "faster than "+baseline+" in "+strings.Join(h.Faster, ", "))
	}
	if len(h.Slower) > 0 {
		parts = append(parts, "slower in "+strings.Join(h.Slower, ", "))
	}
	if len(h.Same) > 0 {
		parts = append(parts, "no difference shown in "+strings.Join(h.Same, ", "))
	}
	if len(h.Bare) > 0 {
		parts = append(parts, "no interval (one round) in "+strings.Join(h.Bare, ", "))
	}
	return strings.Join(parts, "; ")
}

// aaText is the summary's line on the A/A check: each target's noise,
// and the cells whose A/A is outside 0.9-1.1; "" when no sample timed
// the native reference twice.
func (o Overview) aaText() string {
	var parts []string
	for _, h := range o.Headlines {
		if t := h.AA.Text(); t != "" {
			parts = append(parts, h.Target+" "+t)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "A/A " + strings.Join(parts, "; ") + ". The native reference is timed twice in every sample; a cell outside 0.9-1.1 is left out of the headline."
}

// machines are the machines the runs' runners ran on, each once.
func (r *Report) machines() []manifests.Machine {
	var ms []manifests.Machine
	seen := map[string]bool{}
	for _, run := range r.Runs {
		for _, m := range run.Machines {
			if !seen[m.Host] {
				seen[m.Host] = true
				ms = append(ms, m)
			}
		}
	}
	return ms
}

// machineLines are the summary's lines on the machines: one for each
// whose balloon reports free pages, saying what that does and what the
// protocol did about it.
func (r *Report) machineLines() []string {
	var lines []string
	for _, m := range r.machines() {
		if len(m.UnjournaledExt4) > 0 {
			lines = append(lines, MachineName(m.Host)+": ext4 without a journal at "+strings.Join(m.UnjournaledExt4, ", ")+
				": creating a file there costs more the more inodes were freed nearby in the last minute; under protocol 5 the runner frees none of its own while it samples, "+
				"so what slows the create-heavy cells' native reference (C01, C03-C05, C12) is what was freed just before the run, and their A/A check shows the noise left.")
		}
		if m.PageReporting != manifests.PageReportingActive {
			continue
		}
		what := "free page reporting is active"
		if m.ReportedKiBStart != nil {
			what += " (" + kibText(m.ReportedKiBStart) + " reported at the start"
			if d := reportedDuring(m); d != "—" {
				what += ", " + d + " more during the run"
			}
			what += ")"
		}
		lines = append(lines, MachineName(m.Host)+": "+what+": memory freed seconds earlier is slow to write into again; "+
			"every side of every sample left the same memory state before its window (warm-up output freed, pages prefaulted), and the A/A check shows the noise left.")
	}
	return lines
}

// MachineName names a machine: its ssh:// host, or this one.
func MachineName(host string) string {
	if host == "" {
		return "the run's own machine"
	}
	return host
}

// kibText writes KiB as GiB with one decimal, or a dash.
func kibText(kib *int64) string {
	if kib == nil {
		return "—"
	}
	return gib(*kib << 10)
}

// reportedDuring is how much more memory was reported by the run's end.
func reportedDuring(m manifests.Machine) string {
	if m.ReportedKiBStart == nil || m.ReportedKiBEnd == nil {
		return "—"
	}
	d := *m.ReportedKiBEnd - *m.ReportedKiBStart
	return kibText(&d)
}

// swapText writes swap space, "none" for 0.
func swapText(b int64) string {
	if b == 0 {
		return "none"
	}
	return gib(b)
}

// nativeText says in which cells LayerFS showed no cost over native.
func (h Headline) nativeText() string {
	if len(h.NativeSame) == 0 {
		return ""
	}
	return "LayerFS no different from native in " + strings.Join(h.NativeSame, ", ")
}

// headlineValue writes a summary with its interval and marks: "0.92x
// [0.90, 0.94]", "1.01x [0.97, 1.05] ~", a headline over the cells whose
// reference held with those it left out ("1.42x [1.30, 1.55] over 10
// cells; C06, C08 left out: reference unstable"), an inconclusive one
// ("inconclusive: 4 of 12 cells left out (…)"), or a dash.
func headlineValue(s *Summary, f, bound func(float64) string) string {
	if s == nil {
		return "—"
	}
	if s.Inconclusive {
		return fmt.Sprintf("inconclusive: %d of %d cells left out (%s)", len(s.LeftOut), len(s.LeftOut)+s.Cells, leftOutText(s.LeftOut))
	}
	text := f(*s.Value) + intervalText(s.CI, bound) + marks(s.NoDifference, "")
	if s.Suspect > 0 {
		text += ", including " + plural(s.Suspect, "suspect cell")
	}
	if len(s.LeftOut) > 0 {
		text += " over " + plural(s.Cells, "cell") + "; " + leftOutText(s.LeftOut)
	}
	return text
}

// leftOutText names the cells left out, grouped by why: "C06, C08 left
// out: reference unstable (A/A 1.31x, 0.85x); C07 left out: implausible
// (LayerFS 0.40x native)".
func leftOutText(lo []LeftOut) string {
	type group struct {
		cells, details []string
	}
	var order []string
	groups := map[string]*group{}
	for _, l := range lo {
		kind, detail, _ := strings.Cut(l.Why, ": ")
		g := groups[kind]
		if g == nil {
			g = &group{}
			groups[kind] = g
			order = append(order, kind)
		}
		g.cells, g.details = append(g.cells, l.Cell), append(g.details, detail)
	}
	var parts []string
	for _, kind := range order {
		g := groups[kind]
		parts = append(parts, fmt.Sprintf("%s left out: %s (%s)", strings.Join(g.cells, ", "), kind, strings.Join(g.details, ", ")))
	}
	return strings.Join(parts, "; ")
}
