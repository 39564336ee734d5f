//go:build !sealbench_bundle

package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/report"
	"github.com/sealbench/sealbench/runner/stats"
)

// runFlags are the flags of `sealbench run`.
type runFlags struct {
	targets, engine, name string
	bundle, key, expect   string
	out, cells            string
	native, keep          bool
	samples               int
	seed                  uint64
	source                string
	vm                    vmSettings
	debs                  debSettings
}

func newRunCmd(g *global) *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run --target local[,docker...] [--bundle DIR]",
		Short: "Provision targets, run the twelve cells on them, report, tear down and audit",
		Long: `Run the cells under the cache protocol on one or more targets, from one
verified bundle, and leave nothing behind.

With --target, the run provisions each target (as ` + "`sealbench provision`" + ` does),
runs the cells on all of them in one seeded random interleaving, writes the run
directory, prints the report (exact counts first, timings second), then tears
down everything it made and audits that nothing is left: on success, on
failure and on Ctrl-C, unless --keep. With no --bundle it seals one from the
source tree around the working directory with a throw-away key, and says so.
With --engine instead, it drives an Engine that already exists (a target left
up by ` + "`sealbench provision`" + `, or a dockerd), loading the Sandbox image
into it when it lacks it.

Per cell and sample: a fresh Sandbox from the pinned image (its id checked);
sha256sum -c of the bundle inside it with the image's own tools; a Disposable
Store with the cell's base imported; an untimed warm-up mount, run and
unmount; a fresh mount (timed), the body as uid 65534 with no capabilities
(timed on the Sandbox's clock and as exec wall time here), the verifier,
telemetry, Commit and unmount (timed); the same body on a plain directory when
--native. One attempt per step; a failed cell is kept as failed. A host-wide
lock keeps samples from overlapping. Every Sandbox is recorded in the run's
ledger before it is created. The results directory gets samples.jsonl (each
sample fsync'd as it completes), pins.json and report.md.

Exit codes for run: 0 every sample passed and nothing is left; 1 a sample
failed, or the audit found leftovers; 3 bad input; 4 provisioning, the run or
the teardown failed; 130 interrupted (torn down all the same).`,
		Example: `  # Everything in one go: seal with a throw-away key, run on the stand-in and dockerd.
  sudo sealbench run --target local,docker --native

  # A sealed bundle, three cells, three interleaved samples each, a fixed seed.
  sudo sealbench run --target local --bundle out/build-linux-0123456789ab \
    --key keys/sealbench.pub --id build-linux-0123456789ab --cells C01,C06,C12 --samples 3 --seed 7

  # An Engine that is already up: a target left by provision, or a dockerd.
  sealbench run --engine unix:///run/sealbench-dockerd/docker.sock --name docker \
    --bundle out/build-linux-0123456789ab`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runCells(c.Context(), g, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.targets, "target", "", "targets to provision and run on, comma-separated: "+strings.Join(provision.Names(), ", "))
	fl.StringVar(&f.engine, "engine", "", "run on this Engine API endpoint instead (unix:///path/to/socket)")
	fl.StringVar(&f.name, "name", "target", "with --engine: the target's name in the results")
	fl.StringVar(&f.bundle, "bundle", "", "verified bundle directory (its Sandbox image is <bundle>.image/); default: seal one")
	fl.StringVar(&f.key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to verify the bundle with")
	fl.StringVar(&f.expect, "id", "", "pin the bundle: refuse any other (build-linux-<hash>)")
	fl.StringVar(&f.source, "source", "", "with no --bundle: the source tree to seal (default: the one around the working directory)")
	fl.StringVar(&f.out, "out", "", "results directory (default out/runs/<run id>)")
	fl.StringVar(&f.cells, "cells", "", "cells to run, e.g. C01,C06 (default all twelve)")
	fl.BoolVar(&f.native, "native", false, "also run each body on a plain directory in the same Sandbox")
	fl.BoolVar(&f.keep, "keep", false, "leave the targets up after the run (take them down with `sealbench teardown --run ID`)")
	fl.IntVar(&f.samples, "samples", 1, "samples per cell and target, interleaved in a seeded random order")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the interleaving (0: one from the clock; recorded in pins.json)")
	f.vm.flags(fl)
	f.debs.flags(fl)
	return c
}

// runOutcome is what `run --json` prints.
type runOutcome struct {
	Run       string                      `json:"run"`
	Dir       string                      `json:"dir"`
	RunDir    string                      `json:"runDir"`
	Bundle    string                      `json:"bundle"`
	Targets   map[string]*engine.Identity `json:"targets,omitempty"`
	Samples   int                         `json:"samples"`
	Failed    int                         `json:"failed"`
	Kept      bool                        `json:"kept"`
	Teardown  *provision.TeardownResult   `json:"teardown,omitempty"`
	Leftovers []provision.Resource        `json:"leftovers"`
}

func runCells(ctx context.Context, g *global, f *runFlags) (err error) {
	var names []string
	switch {
	case f.engine != "" && f.targets != "":
		return usageErrorf("--target provisions targets; --engine drives one that is up", "pass --target or --engine, not both")
	case f.engine == "" && f.targets == "":
		return usageErrorf("sealbench run --target local,docker (or --engine unix:///path/to/socket)", "--target or --engine is required")
	case f.targets != "":
		names = strings.Split(f.targets, ",")
		if err := checkTargets(names); err != nil {
			return err
		}
	default:
		if !manifests.ValidTargetName(f.name) {
			return usageErrorf("a name such as docker or my-engine", "--name %q is not a target name (lowercase letters, digits, '-')", f.name)
		}
	}
	cellList, err := cells.Parse(f.cells)
	if err != nil {
		return usageErrorf("cells are C01 to C12, comma-separated", "%v", err)
	}
	if f.samples < 1 {
		return usageErrorf("", "--samples must be at least 1")
	}
	if err := f.debs.check(); err != nil {
		return err
	}
	if f.expect != "" && !strings.HasPrefix(f.expect, manifests.BundleNamePrefix) {
		return usageErrorf("--id takes a bundle name such as build-linux-0123456789ab", "--id %q is not a bundle name", f.expect)
	}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	p := newProgress(g.stderr, "run")
	defer p.Close()

	bundleDir, key := f.bundle, f.key
	if bundleDir == "" {
		if bundleDir, key, err = sealThrowaway(ctx, p, f.source); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(bundleDir); err == nil && !fi.IsDir() {
		return usageErrorf("extract it (tar -xf "+bundleDir+") and pass the directory", "--bundle %s is a file: a run executes the bundle's binaries, so it takes the bundle directory", bundleDir)
	}
	v, err := loadVerifier(key)
	if err != nil {
		return err
	}
	res, err := bundle.VerifyDir(ctx, bundleDir, bundle.VerifyOptions{Verifier: v, Expect: f.expect})
	if err != nil {
		return err
	}
	p.Logf("verified %s (key %s)", res.Name, v.KeyID())
	img, err := sandboxImage(ctx, p, bundleDir, key, res, f.debs)
	if err != nil {
		return err
	}

	state := provision.DefaultStateDir()
	run, err := provision.NewRun(state)
	if err != nil {
		return fmt.Errorf("starting a run in %s (set %s to use another directory): %w", state, provision.StateDirEnv, err)
	}
	defer run.Close()
	out := f.out
	if out == "" {
		out = filepath.Join("out", "runs", run.ID)
	}
	p.Logf("run %s: ledger in %s, results in %s", run.ID, run.Dir, out)
	outcome := &runOutcome{Run: run.ID, Dir: out, RunDir: run.Dir, Bundle: res.Name, Targets: map[string]*engine.Identity{}, Leftovers: []provision.Resource{}}
	defer func() { err = finishRun(ctx, g, p, run, f.keep, outcome, err) }()

	// Bring every target up, or drive the Engine we were given.
	var ets []*engine.Identity
	if f.engine != "" {
		cli, err := engine.NewClient(f.engine)
		if err != nil {
			return usageErrorf("--engine takes a URL such as unix:///run/standin.sock", "%v", err)
		}
		err = engine.LoadImage(ctx, cli, run.Ledger, f.name, f.engine, img)
		cli.Close()
		if err != nil {
			return fmt.Errorf("loading the Sandbox image into %s: %w", f.engine, err)
		}
		id, err := engine.Identify(ctx, f.name, f.engine)
		if err != nil {
			return err
		}
		ets = append(ets, id)
	}
	for _, name := range names {
		t, err := newTarget(name, run, bundleDir, res, img, f.vm, p.Logf)
		if err != nil {
			return err
		}
		p.Status("provisioning " + name)
		id, err := bringUp(ctx, t, img, p.Logf)
		if err != nil {
			return err
		}
		outcome.Targets[name] = id
		p.Logf("%s: %s, kernel %s, %d CPUs, %s", name, id.Engine, id.Kernel, id.CPUs, humanBytes(id.MemoryBytes))
		ets = append(ets, id)
	}

	digest := func(p string) manifests.Digest {
		f, _ := res.Manifest.File(p)
		return f.Digest
	}
	arch := "bin/linux-" + runtime.GOARCH + "/"
	samples, runErr := runner.RunEngine(ctx, runner.EngineOptions{
		RunID: run.ID, Ledger: run.Ledger, Targets: ets, BundleID: res.Name, Image: img,
		RunnerSHA256: digest(arch + "sealbench"), StandinSHA256: digest(arch + "standin"),
		Cells: cellList, Samples: f.samples, Seed: f.seed, Native: f.native, OutDir: out,
		Tools: map[string]string{"sealbench": version.Version, "go": runtime.Version()},
		Log:   p.Logf, Status: p.Status,
	})
	outcome.Samples = len(samples)
	for _, s := range samples {
		if s.Status != manifests.StatusOK {
			outcome.Failed++
		}
	}
	if runErr != nil {
		var names []string
		for _, t := range ets {
			names = append(names, t.Target)
		}
		missing := missingSamples(stats.Interleave(names, cellList, f.samples, f.seed), samples)
		return fmt.Errorf("run %s stopped with %d samples missing (%s; the %d done are in %s): %w",
			run.ID, len(missing), strings.Join(missing, ", "), len(samples), out, runErr)
	}
	md, err := writeReport(out)
	if err != nil {
		return err
	}
	if !g.json {
		p.Close()
		fmt.Fprint(g.stdout, md)
	}
	if outcome.Failed > 0 {
		return &userError{Code: ExitMismatch, Err: fmt.Errorf("%d of %d samples failed", outcome.Failed, len(samples)),
			Hint: "each failed sample's reason is in " + filepath.Join(out, "samples.jsonl")}
	}
	return nil
}

// writeReport writes out/report.md from the samples there and returns it.
func writeReport(out string) (string, error) {
	inputs, err := report.Load([]string{out})
	if err != nil {
		return "", err
	}
	rep, err := report.Build(inputs, report.Options{})
	if err != nil {
		return "", err
	}
	var md strings.Builder
	if err := report.Write(&md, rep, "md"); err != nil {
		return "", err
	}
	return md.String(), atomicfile.WriteFile(filepath.Join(out, "report.md"), []byte(md.String()), 0o644)
}

// finishRun tears the run down (unless keep) and audits it, whatever runErr
// is: success, a failure, or Ctrl-C (ctx is done then; teardown runs all
// the same). It prints the outcome and returns the error to exit with.
func finishRun(ctx context.Context, g *global, p *progress, run *provision.Run, keep bool, o *runOutcome, runErr error) error {
	ctx = context.WithoutCancel(ctx)
	errs := multierror.Append(nil, runErr)
	if keep {
		o.Kept = true
		p.Logf("--keep: the targets stay up; take them down with `sealbench teardown --run %s`", run.ID)
	} else {
		p.Status("tearing down run " + run.ID)
		run.Close()
		td, err := provision.Teardown(ctx, run.Dir, provision.TeardownOptions{Log: p.Logf})
		o.Teardown = td
		if err != nil {
			errs = multierror.Append(errs, &userError{Code: ExitFailed, Err: fmt.Errorf("tearing down run %s: %w", run.ID, err),
				Hint: "fix the causes above and run `sealbench teardown --run " + run.ID + "`"})
		}
		p.Status("auditing run " + run.ID)
		a, err := provision.Audit(ctx, provision.AuditOptions{StateDir: filepath.Dir(filepath.Dir(run.Dir)), Run: run.ID})
		switch {
		case err != nil:
			errs = multierror.Append(errs, fmt.Errorf("auditing run %s: %w", run.ID, err))
		case len(a.Leftovers) > 0:
			o.Leftovers = a.Leftovers
			var ls []string
			for _, r := range a.Leftovers {
				ls = append(ls, "  "+r.String())
			}
			errs = multierror.Append(errs, &userError{Code: ExitLeftovers, Err: fmt.Errorf("the audit found %d leftovers of run %s:\n%s", len(ls), run.ID, strings.Join(ls, "\n")),
				Hint: "run `sealbench teardown --run " + run.ID + "`, or `sealbench audit --fix`"})
		default:
			p.Logf("torn down; the audit finds nothing left of run %s", run.ID)
		}
	}
	p.Close()
	err := firstCoded(errs.ErrorOrNil())
	switch {
	case g.json && err != nil:
		return &detailError{err, "run", o} // one JSON document: the error, with the outcome in it
	case g.json:
		return writeJSON(g.stdout, o)
	case o.Samples > 0:
		fmt.Fprintf(g.stdout, "\nrun %s: %d samples, %d failed; results in %s\n", o.Run, o.Samples, o.Failed, o.Dir)
	}
	return err
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

// sealThrowaway seals the source tree around the working directory (or
// source) into out/throwaway/ with a throw-away key pair kept there (made
// on first use, with an empty password), and returns the bundle and the
// public key. The Sandbox image is built next to it when the run asks for
// it (sandboxImage), and reused while the source does not change.
func sealThrowaway(ctx context.Context, p *progress, source string) (bundleDir, pubKey string, err error) {
	if source == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", "", err
		}
		if source, err = bundle.FindModuleRoot(wd); err != nil {
			return "", "", usageErrorf("run it inside a sealbench checkout, or pass --bundle (or --source)", "no --bundle, and no source tree to seal: %v", err)
		}
	}
	dir := filepath.Join("out", "throwaway")
	privKey, pubKey := filepath.Join(dir, sign.PrivateKeyFile), filepath.Join(dir, sign.PublicKeyFile)
	if _, err := os.Stat(privKey); err != nil {
		if _, _, err := sign.WriteKeyPair(dir, nil, false); err != nil {
			return "", "", fmt.Errorf("making a throw-away key pair in %s: %w", dir, err)
		}
	}
	signer, err := sign.LoadPrivateKey(privKey, nil)
	if err != nil {
		return "", "", fmt.Errorf("the throw-away key %s (remove %s to make a new one): %w", privKey, dir, err)
	}
	p.Logf("no --bundle: sealing %s into %s with a throw-away key (%s): such a bundle proves only that it was built here", source, dir, pubKey)
	sealed, err := bundle.Seal(ctx, bundle.SealOptions{Source: source, OutDir: dir, Signer: signer, Log: p.Logf})
	if err != nil {
		return "", "", err
	}
	return sealed.Dir, pubKey, nil
}

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
