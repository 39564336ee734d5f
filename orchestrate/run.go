package orchestrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runner/report"
	"github.com/sealbench/sealbench/runner/stats"
	"github.com/sealbench/sealbench/runs"
)

// RunOptions says what Run runs, where, and where results go.
type RunOptions struct {
	Bundle *Bundle
	// Targets are provisioned for the run; or Engine is an Engine API
	// endpoint that is up already, named Name in the results.
	Targets      []string
	Engine, Name string
	// Specs are the specs of the targets that are more than their kind
	// (on a remote host: docker@ssh://...; or with a parameter:
	// kubernetes:RUNTIMECLASS), by target name, and SSH how hosts are
	// reached.
	Specs map[string]remote.Spec
	SSH   SSH
	// Options are the targets' own options (provision.Flags).
	Options provision.OptionSet
	// Suites name the suites the cells are of (none: the twelve);
	// SuiteDefs define those of them the runner does not have built in
	// (a --suite-dir's, which the bundle holds).
	Suites    []string
	SuiteDefs []manifests.Suite
	Cells     []string
	Samples   int
	Seed      uint64
	Native    bool
	// Out is the results directory; empty: out/runs/<run id>.
	Out string
	// Keep leaves the targets up after the run.
	Keep     bool
	StateDir string // empty: runs.DefaultStateDir
	Log      func(string, ...any)
	Status   func(string)
	// Done, when set, hears each finished sample (which, and how it
	// went), with the line that says so; unset, the line goes to Log.
	Done func(manifests.SampleDone, string)
	// Detail, when set, hears the lines of each step's parts (each
	// resource torn down); unset, they go to Log.
	Detail func(string, ...any)
	// Report, when set, hears the report as soon as it is written,
	// before teardown, with the files it was written to (ReportFormats).
	Report func(r *report.Report, files []string)

	// FUSEURing is what the run does with the host's enable_uring (FUSE
	// over io_uring) for its targets on this host's kernel: the zero
	// value, FUSEURingOff, leaves it and serves LayerFS over /dev/fuse;
	// the CLI's default is FUSEURingAuto. Every target's pins say what
	// LayerFS could use, either way.
	FUSEURing FUSEURing

	// SignKey, when set, signs the results after the audit:
	// results.sigstore.json in the results directory (see SignResults).
	// Without it the report says the run is unsigned.
	SignKey *sign.Signer
}

// RunOutcome is what a run did: what `run --json` prints.
type RunOutcome struct {
	Run       string                      `json:"run"`
	Dir       string                      `json:"dir"`
	RunDir    string                      `json:"runDir"`
	Bundle    string                      `json:"bundle"`
	Targets   map[string]*engine.Identity `json:"targets,omitempty"`
	Samples   int                         `json:"samples"`
	Reports   []string                    `json:"reports,omitempty"` // report.md, .html, .json
	Failed    int                         `json:"failed"`
	Kept      bool                        `json:"kept"`
	Teardown  *runs.TeardownResult        `json:"teardown,omitempty"`
	Leftovers []runs.Resource             `json:"leftovers"`
	// Audit is the audit's verdict, as the results attestation records it.
	Audit attest.Audit `json:"audit"`
	// Attestation is the results attestation, when the run was signed.
	Attestation string `json:"attestation,omitempty"`
}

// Run runs the cells on every target of o in a new run: it brings the
// targets up (or loads the Sandbox image into o.Engine), runs the cells
// in one seeded random interleaving, writes samples.jsonl, pins.json and
// report.md, then, unless o.Keep, tears everything down and audits it: on
// success, on failure and on Ctrl-C. The outcome is there whenever a run
// was started, with the error as well when there is one; the error's exit
// code is ExitMismatch for a failed sample or leftovers.
func Run(ctx context.Context, o RunOptions) (outcome *RunOutcome, err error) {
	logf, status := orNop(o.Log), o.Status
	if status == nil {
		status = func(string) {}
	}
	b := o.Bundle
	run, err := newRun(o.StateDir)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	// The connections to remote hosts close after teardown (deferred
	// below, so run first), which reaches their Engines over them.
	conns := newHostConns(run, o.SSH, logf)
	defer conns.close()
	out := o.Out
	if out == "" {
		out = filepath.Join("out", "runs", run.ID)
	}
	logf("run %s: ledger in %s, results in %s", run.ID, run.Dir, out)
	outcome = &RunOutcome{Run: run.ID, Dir: out, RunDir: run.Dir, Bundle: b.Verified.Name, Targets: map[string]*engine.Identity{}, Leftovers: []runs.Resource{}}
	defer func() {
		err = finish(ctx, run, o.Keep, outcome, err, logf, o.detailOr(logf), status)
		err = signRun(o, outcome, err, logf) // after the audit, whose verdict it signs
	}()
	uring, err := setupFUSEURing(run, o.FUSEURing, o.Targets, o.Engine, logf)
	if err != nil {
		return outcome, err
	}

	// Bring every target up, or drive the Engine we were given.
	var ids []*engine.Identity
	targets := map[string]provision.Target{}
	if o.Engine != "" {
		cli, err := engine.NewClient(o.Engine)
		if err != nil {
			return outcome, usagef("--engine takes a URL such as unix:///run/standin.sock", "%v", err)
		}
		err = engine.LoadImage(ctx, cli, run.Ledger, o.Name, o.Engine, b.Image)
		cli.Close()
		if err != nil {
			return outcome, fmt.Errorf("loading the Sandbox image into %s: %w", o.Engine, err)
		}
		id, err := engine.Identify(ctx, o.Name, o.Engine)
		if err != nil {
			return outcome, err
		}
		pinFUSEURing(id, onHostKernel("", o.Engine), uring)
		ids = append(ids, id)
	}
	for _, name := range o.Targets {
		status("provisioning " + name)
		spec, far := o.Specs[name]
		if !far {
			spec = remote.Spec{Name: name, Kind: name}
		}
		t, id, err := bringUp(ctx, spec, run, conns, b, o.Options, logf)
		if err != nil {
			return outcome, err
		}
		targets[name] = t
		pinFUSEURing(id, onHostKernel(name, ""), uring)
		outcome.Targets[name] = id
		logf("%s: %s, kernel %s, %d CPUs, %s", name, id.Engine, id.Kernel, id.CPUs, HumanBytes(id.MemoryBytes))
		ids = append(ids, id)
	}

	// One runner per host: this machine's targets by the runner here,
	// exactly as a run of them alone; each remote host's by a runner
	// there (hostrun.go).
	var samples []manifests.Sample
	var missingSlots []stats.Slot
	var runErr error
	if groups := groupTargets(ids, o.Specs, thisBootID()); len(groups) == 1 && groups[0].key() == "" {
		plan, err := newPlan(run, b, o, ids, out)
		if err != nil {
			return outcome, err
		}
		samples, runErr = runSealed(ctx, run, b, plan, "", logf, status, o.doneOr(logf))
		if runErr != nil {
			missingSlots = groups[0].order(o)
		}
	} else {
		samples, missingSlots, runErr = runGroups(ctx, run, b, o, groups, targets, conns, out, logf, status)
	}
	outcome.Samples = len(samples)
	for _, s := range samples {
		if s.Failed() {
			outcome.Failed++
		}
	}
	if runErr != nil {
		missing := missingSamples(missingSlots, samples)
		if len(missing) == 0 {
			// Every planned sample ran: the precision rule's were under way.
			return outcome, fmt.Errorf("run %s stopped while the precision rule took more samples (the %d done are in %s): %w",
				run.ID, len(samples), out, runErr)
		}
		return outcome, fmt.Errorf("run %s stopped with %d samples missing (%s; the %d done are in %s): %w",
			run.ID, len(missing), strings.Join(missing, ", "), len(samples), out, runErr)
	}
	rep, files, err := writeReport(out, unsignedYet(o.SignKey))
	if err != nil {
		return outcome, err
	}
	outcome.Reports = files
	if o.Report != nil {
		o.Report(rep, files)
	}
	if outcome.Failed > 0 {
		return outcome, &cliutil.UserError{Code: ExitMismatch, Err: fmt.Errorf("%d of %d samples failed", outcome.Failed, len(samples)),
			Hint: "each failed sample's reason is in " + filepath.Join(out, "samples.jsonl")}
	}
	return outcome, nil
}

// doneOr is how finished samples are heard: by o.Done, or as lines to
// logf.
func (o RunOptions) doneOr(logf func(string, ...any)) sampleDone {
	if o.Done != nil {
		return o.Done
	}
	return func(_ manifests.SampleDone, line string) { logf("%s", line) }
}

// detailOr is where the lines of a step's parts go: o.Detail, or logf.
func (o RunOptions) detailOr(logf func(string, ...any)) func(string, ...any) {
	if o.Detail != nil {
		return o.Detail
	}
	return logf
}

// ReportFormats are the formats a run writes its report in, each as
// out/report.<format>.
var ReportFormats = []string{"md", "html", "json"}

// writeReport writes the report of the samples in out as out/report.md,
// report.html and report.json, with what the host found about the run's
// signed results put into each input first (signature nil: nothing). It
// returns the report and the files.
func writeReport(out string, signature func(*report.Input)) (*report.Report, []string, error) {
	inputs, err := report.Load([]string{out})
	if err != nil {
		return nil, nil, err
	}
	for i := range inputs {
		if signature != nil {
			signature(&inputs[i])
		}
	}
	rep, err := report.Build(inputs, report.Options{})
	if err != nil {
		return nil, nil, err
	}
	var files []string
	for _, format := range ReportFormats {
		var b bytes.Buffer
		if err := report.Write(&b, rep, format); err != nil {
			return nil, nil, err
		}
		path := filepath.Join(out, "report."+format)
		if err := atomicfile.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, nil, err
		}
		files = append(files, path)
	}
	return rep, files, nil
}

// finish tears the run down (unless keep) and audits it, whatever runErr
// is: success, a failure, or Ctrl-C (ctx is done then; teardown runs all
// the same). It returns the error to exit with: the first of them that
// has an exit code decides it.
func finish(ctx context.Context, run *runs.Run, keep bool, o *RunOutcome, runErr error, logf, detailf func(string, ...any), status func(string)) error {
	ctx = context.WithoutCancel(ctx)
	errs := multierror.Append(nil, runErr)
	if keep {
		o.Kept = true
		o.Audit = attest.Audit{Verdict: attest.AuditKept, Detail: "--keep: not torn down, not audited"}
		logf("--keep: the targets stay up; take them down with `sealbench teardown --run %s`", run.ID)
		return firstCoded(errs.ErrorOrNil())
	}
	status("tearing down run " + run.ID)
	run.Close()
	td, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{Log: detailf})
	o.Teardown = td
	if td != nil {
		logf("tore down run %s: %d resources removed", run.ID, len(td.Removed))
	}
	if err != nil {
		errs = multierror.Append(errs, &cliutil.UserError{Code: cliutil.ExitFailed, Err: fmt.Errorf("tearing down run %s: %w", run.ID, err),
			Hint: "fix the causes above and run `sealbench teardown --run " + run.ID + "`"})
	}
	status("auditing run " + run.ID)
	a, err := runs.Audit(ctx, runs.AuditOptions{StateDir: filepath.Dir(filepath.Dir(run.Dir)), Run: run.ID})
	switch {
	case err != nil:
		o.Audit = attest.Audit{Verdict: attest.AuditFailed, Detail: err.Error()}
		errs = multierror.Append(errs, fmt.Errorf("auditing run %s: %w", run.ID, err))
	case len(a.Leftovers) > 0:
		o.Leftovers = a.Leftovers
		o.Audit = attest.Audit{Verdict: attest.AuditLeftovers, Leftovers: len(a.Leftovers)}
		var ls []string
		for _, r := range a.Leftovers {
			ls = append(ls, "  "+r.String())
		}
		errs = multierror.Append(errs, &cliutil.UserError{Code: ExitMismatch, Err: fmt.Errorf("the audit found %d leftovers of run %s:\n%s", len(ls), run.ID, strings.Join(ls, "\n")),
			Hint: "run `sealbench teardown --run " + run.ID + "`, or `sealbench audit --fix`"})
	default:
		o.Audit = attest.Audit{Verdict: attest.AuditClean}
		logf("torn down; the audit finds nothing left of run %s", run.ID)
	}
	return firstCoded(errs.ErrorOrNil())
}

// firstCoded returns err with the exit code of the first error in it that
// has one (an interrupt, a failed sample), so that several errors exit as
// the first of them would alone.
func firstCoded(err error) error {
	var me *multierror.Error
	if !errors.As(err, &me) || len(me.Errors) == 0 {
		return err
	}
	if len(me.Errors) == 1 {
		return me.Errors[0]
	}
	first := me.Errors[0]
	msgs := make([]string, len(me.Errors))
	for i, e := range me.Errors {
		msgs[i] = e.Error()
	}
	return &wrapped{first: first, msg: strings.Join(msgs, "\n")}
}

// wrapped is several errors that exit as the first would.
type wrapped struct {
	first error
	msg   string
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.first }

// missingSamples names the slots of the run's order that have no sample
// ("local C03 round 2"), at most ten and a count of the rest.
func missingSamples(order []stats.Slot, done []manifests.Sample) []string {
	have := map[stats.Slot]bool{}
	for _, s := range done {
		have[stats.Slot{Round: s.Round, Target: s.Target, Cell: s.Cell}] = true
	}
	var out []string
	n := 0
	for _, sl := range order {
		if have[sl] {
			continue
		}
		if n++; n <= 10 {
			out = append(out, fmt.Sprintf("%s %s round %d", sl.Target, sl.Cell, sl.Round))
		}
	}
	if n > 10 {
		out = append(out, fmt.Sprintf("and %d more", n-10))
	}
	return out
}

// HumanBytes says n bytes in binary units: "2.0 GiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
