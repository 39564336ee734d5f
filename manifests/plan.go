package manifests

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
)

// The plan is the contract between the host's sealbench and the bundle's
// runner. The host verifies the bundle, provisions the targets, copies
// the runner for its own OS and architecture out of the bundle (checking
// its digest against the signed manifest as it copies), writes a plan and
// starts the copy with `sealbench sample --plan FILE`. The runner takes
// the host-wide lock itself, records every Sandbox in the ledger before
// creating it, writes samples and pins into OutDir as it goes, reports
// progress on stderr (one ProgressLine per line) and exits with
// ExitRunner*. The host forwards SIGINT, and tears down afterwards
// whatever the runner's exit.
const (
	RunPlanKind = "sealbench.plan"
	// MaxPlanSize bounds a plan file.
	MaxPlanSize = 4 << 20
)

// The runner's exit codes (`sealbench sample`), the same numbers as the
// host's for the same meanings.
const (
	ExitRunnerOK          = 0   // every sample passed
	ExitRunnerSampleFail  = 1   // a sample failed (each is kept, with its reason)
	ExitRunnerBadPlan     = 3   // the plan is unreadable or invalid, or names another runner
	ExitRunnerFailed      = 4   // the run could not go on: an Engine, the ledger, the results directory
	ExitRunnerInterrupted = 130 // SIGINT or SIGTERM: the samples so far are on disk
)

// RunPlan says what the runner runs, where, and where results go.
type RunPlan struct {
	FormatVersion int    `json:"formatVersion"`
	Kind          string `json:"kind"`
	RunID         string `json:"runId"`
	BundleID      string `json:"bundleId"`
	// Ledger is the run's ledger file; every Sandbox is recorded in it
	// before it is created. Lock is the host-wide lock file.
	Ledger string `json:"ledger"`
	Lock   string `json:"lock"`
	// OutDir gets samples.jsonl and pins.json.
	OutDir  string       `json:"outDir"`
	Targets []PlanTarget `json:"targets"`
	Image   PlanImage    `json:"image"`
	Cells   []string     `json:"cells"`
	// Suites name the suites the cells are of (absent: DefaultSuite);
	// SuiteDefs are the definitions of those that are not built into the
	// runner (a --suite-dir's), whose scripts the bundle holds at
	// suites/NAME/.
	Suites    []string `json:"suites,omitempty"`
	SuiteDefs []Suite  `json:"suiteDefs,omitempty"`
	Samples   int      `json:"samples"`
	Seed      uint64   `json:"seed"`
	Native    bool     `json:"native"`
	// RunnerSHA256 is the signed manifest's digest of the runner the host
	// copied and started: the runner refuses a plan made for other bytes.
	// StandinSHA256 is the manifest's digest of the stand-in, for the pins.
	RunnerSHA256  Digest `json:"runnerSha256"`
	StandinSHA256 Digest `json:"standinSha256"`
	// Tools are host tool versions to pin (go, sealbench...).
	Tools map[string]string `json:"tools,omitempty"`
	// StopOnStdinEOF stops the runner at the sample under way when its
	// stdin reaches EOF, as SIGINT does: a runner on a remote host is
	// started over SSH with its stdin kept open for the run, so a lost
	// connection stops it (docs/design/remote-hosts.md).
	StopOnStdinEOF bool `json:"stopOnStdinEOF,omitempty"`
	// BundleOrigin is the registry reference the bundle was pulled from,
	// for the pins; absent for a bundle taken from a directory.
	BundleOrigin *BundleOrigin `json:"bundleOrigin,omitempty"`
}

// PlanTarget is one target's Engine, as the host identified it.
type PlanTarget struct {
	// TargetPins' Endpoint is where the runner reaches the Engine.
	TargetPins
	EngineVersion string `json:"engineVersion"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
}

// PlanImage is the Sandbox image, already on every target's Engine.
type PlanImage struct {
	ID       Digest       `json:"id"`
	Ref      string       `json:"ref"`
	Lock     *PackageLock `json:"lock,omitempty"`
	Relocked string       `json:"relocked,omitempty"`
}

// ProgressLine is one line the runner writes on stderr: a Log line for
// the host's log, or a Status for its status line (the phase of the
// sample under way). A line that is not one is passed on as it is.
type ProgressLine struct {
	Log    string `json:"log,omitempty"`
	Status string `json:"status,omitempty"`
	// Sample, with Log, says a sample has finished: the host counts it
	// towards the run's progress and shows Log only where asked to
	// (run -v).
	Sample *SampleDone `json:"sample,omitempty"`
}

// SampleDone is a finished sample, as the runner's progress tells it.
type SampleDone struct {
	Target string       `json:"target"`
	Cell   string       `json:"cell"`
	Round  int          `json:"round"`
	Status SampleStatus `json:"status"`
	// Precision marks a sample the precision rule added (Sample.Precision).
	Precision bool `json:"precision,omitempty"`
}

// Validate reports every problem with p, each naming its field.
func (p *RunPlan) Validate() error {
	ps := &problems{doc: "run plan"}
	ps.runHeader(p.FormatVersion, p.Kind, RunPlanKind, p.RunID, p.BundleID)
	ps.origin("bundleOrigin", p.BundleOrigin)
	for _, f := range []struct{ name, path string }{{"ledger", p.Ledger}, {"lock", p.Lock}, {"outDir", p.OutDir}} {
		if !filepath.IsAbs(f.path) {
			ps.addf(f.name, "%q is not an absolute path", f.path)
		}
	}
	if len(p.Targets) == 0 {
		ps.addf("targets", "missing: a run has at least one target")
	}
	names := map[string]bool{}
	for i, t := range p.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		ps.target(f, t.TargetPins, names)
		if t.Endpoint == "" {
			ps.addf(f+".endpoint", "missing")
		}
	}
	if err := p.Image.ID.Validate(); err != nil {
		ps.addf("image.id", "%v", err)
	}
	if p.Image.Lock != nil {
		if err := p.Image.Lock.Validate(); err != nil {
			ps.addf("image.lock", "%v", err)
		}
	}
	if len(p.Cells) == 0 {
		ps.addf("cells", "missing")
	}
	seen := map[string]bool{}
	for i, c := range p.Cells {
		if !cellNameRE.MatchString(c) || seen[c] {
			ps.addf(fmt.Sprintf("cells[%d]", i), "%q is not a cell name, or is listed twice", c)
		}
		seen[c] = true
	}
	ps.suiteNames("suites", p.Suites)
	ps.suiteDefs("suiteDefs", p.SuiteDefs, p.Suites)
	if p.Samples <= 0 {
		ps.addf("samples", "must be positive")
	}
	for _, d := range []struct {
		name string
		d    Digest
	}{{"runnerSha256", p.RunnerSHA256}, {"standinSha256", p.StandinSHA256}} {
		if err := d.d.Validate(); err != nil {
			ps.addf(d.name, "%v", err)
		}
	}
	return ps.err()
}

// Marshal returns the plan as indented JSON with a trailing newline.
func (p *RunPlan) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the run plan: %w", err)
	}
	return append(b, '\n'), nil
}

// ReadRunPlan reads a plan strictly (bounded, no unknown fields, one
// document) and validates it.
func ReadRunPlan(r io.Reader) (*RunPlan, error) {
	var p RunPlan
	if err := decodeStrict(r, MaxPlanSize, "the run plan", &p); err != nil {
		return nil, err
	}
	if p.Tools == nil {
		p.Tools = map[string]string{}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}
