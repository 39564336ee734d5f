//go:build !sealbench_bundle

package cmd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/report"
	"github.com/sealbench/sealbench/vmimages"
)

// defaultSamples is how many samples run takes per cell and target: the
// period of the windows' balanced orders (manifests.BalancedOrders), so
// that a run's orders are balanced, and more than the fewest (5) for
// which a paired bootstrap interval means something.
const defaultSamples = 6

// maxSamples bounds --samples: more is a typo, not a run.
const maxSamples = 1000

// runFlags are the flags of `sealbench run`.
type runFlags struct {
	targets, engine, name string
	bundle, key, expect   string
	insecure              bool
	signKey               string
	out, cells, suites    string
	suiteDirs             []string
	native, keep, verbose bool
	fuseURing             fuseURingFlag
	samples               int
	seed                  uint64
	source                string
	targetFlags           targetFlags
	debs                  debSettings
	ssh                   sshSettings
}

func newRunCmd(g *global) *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run --target KIND[,KIND...] [--bundle DIR]",
		Short: "Provision targets, run the twelve cells (or another suite) on them, report, tear down and audit",
		Long: `Run the cells under the cache protocol on one or more targets, from one
verified bundle, and leave nothing behind. The cells are the twelve
filesystem cells unless --suite names other suites (sealbench suites lists
them: agent-tools is an agent's tool loop); --cells picks some of their cells.
--suite-dir runs a suite of your own (docs/suites.md), alone or beside the
suites --suite names: with no --bundle it is sealed into the bundle run seals;
a --bundle must hold it already, as ` + "`sealbench seal --suite-dir`" + ` seals it.
The Sandbox image is the smallest variant that carries the suites' tools: the
twelve's, or for agent-tools (cargo, npm) the tools variant, which the first
such run builds beside the bundle (<bundle>.tools.image) from its pinned
Debian packages.

With --target, the run provisions each target (as ` + "`sealbench provision`" + ` does),
hands the sampling to the bundle's own runner (its digest checked against the
signed manifest), which runs the cells on all of them in one seeded random
interleaving (--samples each, default 6; with --native, a cell whose A/A
interval is still wider than 0.2 gets up to two more blocks of 6: the
precision rule, docs/measurements.md; the Sandboxes of taken samples are
stopped and removed when all are taken, since freeing inodes while sampling
slows creates on ext4 without a journal), then writes the run directory
(samples.jsonl, pins.json, and the report as report.md, .html and .json:
exact counts first, timings second), tears down everything it made and audits
that nothing is left: on success, on failure and on Ctrl-C, unless --keep. It
ends by printing the report's summary and where the reports are. While it runs
it shows its steps and its progress (samples done of all, about how long the
rest takes) and a line for each cell done on a target; -v shows every sample
and every resource torn down as well. With no --bundle it
seals one from the source tree around the working directory with a throw-away
key, and says so. With --engine instead, it drives an Engine that is already
up. --native runs each body on a plain directory beside LayerFS, and again
(the A/A check); --sign-key signs the results after the audit. LayerFS on
this host's kernel is served over FUSE over io_uring where the kernel has it:
as root the run turns the host's enable_uring on and puts it back once no run
relies on it (--fuse-uring=off leaves it, and uses /dev/fuse).

A target is KIND, KIND:PARAM where the kind takes one, KIND@NODE for a node of
a cluster, or KIND@ssh://USER@HOST[:PORT] on a remote host, each optionally
NAME=...; the kinds:

` + targetHelp() + `
More: docs/measurements.md (the protocol and what a sample records),
docs/targets.md (every target, and adding one), docs/design/remote-hosts.md,
docs/design/kubernetes.md, docs/report.md.

Exit codes for run: 0 every sample passed and nothing is left; 1 a sample
failed, or the audit found leftovers; 3 bad input; 4 provisioning, the run or
the teardown failed; 130 interrupted (torn down all the same).`,
		Example: `  # An agent's tool loop (traverse, read, write, git status, rg) on two targets.
  sudo sealbench run --target local,docker --suite agent-tools --native --samples 3

  # A sealed bundle, three cells, a fixed seed, one sample each: a quick look.
  sudo sealbench run --target local --bundle out/build-linux-0123456789ab \
    --key keys/sealbench.pub --id build-linux-0123456789ab --cells C01,C06,C12 --samples 1 --seed 7

  # Signed results: results.sigstore.json, checked by report --key.
  SEALBENCH_PASSWORD= sudo -E sealbench run --target local --sign-key keys/sealbench.key --out out/signed
  sealbench report out/signed --key keys/sealbench.pub --require-signed

  # LayerFS over /dev/fuse, leaving the host's enable_uring as it is.
  sudo sealbench run --target local,docker --cells C01,C03 --fuse-uring=off

  # An Engine that is already up: a target left by provision, or a dockerd.
  sealbench run --engine unix:///run/sealbench-dockerd/docker.sock --name docker \
    --bundle out/build-linux-0123456789ab

` + targetExamples("run"),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runCells(c.Context(), g, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.targets, "target", "", "targets to provision and run on, comma-separated: "+strings.Join(provision.Names(), ", ")+", each as [NAME=]KIND[:PARAM][@NODE] or [NAME=]KIND@ssh://USER@HOST[:PORT]")
	fl.StringVar(&f.engine, "engine", "", "run on this Engine API endpoint instead (unix:///path/to/socket)")
	fl.StringVar(&f.name, "name", "target", "with --engine: the target's name in the results")
	fl.StringVar(&f.bundle, "bundle", "", "verified bundle directory (its Sandbox image is <bundle>.image/), or oci://REGISTRY/REPO[:TAG|@DIGEST] to pull it from; default: seal one")
	fl.BoolVar(&f.insecure, "insecure", false, "with --bundle oci://: allow plain HTTP to a registry that is not on loopback")
	fl.StringVar(&f.key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to verify the bundle with")
	fl.StringVar(&f.signKey, "sign-key", "", "private key to sign the results with (results.sigstore.json, after the audit); password from $"+sign.PasswordEnv)
	fl.StringVar(&f.expect, "id", "", "pin the bundle: refuse any other (build-linux-<hash>)")
	fl.StringVar(&f.source, "source", "", "with no --bundle: the source tree to seal (default: the one around the working directory)")
	fl.StringVar(&f.out, "out", "", "results directory, a new one: never an earlier run's nor inside the bundle (default out/runs/<run id>)")
	fl.StringVar(&f.suites, "suite", "", "suites to run, comma-separated: "+strings.Join(cells.SuiteNames(), ", ")+" (default cells, the twelve; sealbench suites lists them)")
	fl.StringSliceVar(&f.suiteDirs, "suite-dir", nil, "a suite of your own to run (beside --suite's, if any): a directory with suite.json and its scripts (docs/suites.md), sealed into the bundle")
	fl.StringVar(&f.cells, "cells", "", "cells of those suites to run, e.g. C01,C06 or T1,T4 (default all of them)")
	fl.BoolVar(&f.native, "native", false, "also run each body on a plain directory in the same Sandbox")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say every sample and every resource torn down as it happens, not only each step")
	fl.BoolVar(&f.keep, "keep", false, "leave the targets up after the run (take them down with sealbench teardown --run ID)")
	addFUSEURingFlag(fl, &f.fuseURing)
	fl.IntVar(&f.samples, "samples", defaultSamples, "samples per cell and target, interleaved in a seeded random order (1: a quick look, no intervals)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the interleaving (0: one from the clock; recorded in pins.json)")
	f.targetFlags.flags(fl, provision.CommandRun)
	f.debs.flags(fl)
	f.ssh.flags(fl)
	return c
}

func runCells(ctx context.Context, g *global, f *runFlags) error {
	var names []string
	far := map[string]remote.Spec{}
	switch {
	case f.engine != "" && f.targets != "":
		return usageErrorf("--target provisions targets; --engine drives one that is up", "pass --target or --engine, not both")
	case f.engine == "" && f.targets == "":
		return usageErrorf("sealbench run --target "+strings.Join(provision.Names(), ",")+" (any of them), or --engine unix:///path/to/socket", "--target or --engine is required")
	case f.targets != "":
		specs, err := orchestrate.CheckTargets(strings.Split(f.targets, ","))
		if err != nil {
			return err
		}
		names = orchestrate.Names(specs)
		for _, s := range specs {
			if s.Host != nil || s.Param != "" || s.Node != "" {
				far[s.Name] = s
			}
		}
	default:
		if err := engine.CheckEndpoint(f.engine); err != nil {
			return usageErrorf("--engine takes unix:///path/to/docker.sock or tcp://host:port", "--engine: %v", err)
		}
		if !manifests.ValidTargetName(f.name) {
			return usageErrorf("a name such as my-engine", "--name %q is not a target name (lowercase letters, digits, '-')", f.name)
		}
	}
	if err := f.targetFlags.check(); err != nil {
		return err
	}
	if err := f.ssh.check(); err != nil {
		return err
	}
	if f.out != "" {
		if err := checkRunOut(f.out, f.bundle); err != nil {
			return err
		}
	}
	var extra []*cells.Suite
	for _, d := range f.suiteDirs {
		s, err := loadSuiteDir(d)
		if err != nil {
			return err
		}
		extra = append(extra, s)
	}
	sel, err := cells.Select(f.suites, extra, f.cells)
	if err != nil {
		return usageErrorf("cells are C01 to C12 (the twelve), or another suite's: the suites are "+strings.Join(cells.SuiteNames(), ", ")+" (sealbench suites lists their cells); comma-separated", "%v", err)
	}
	cellList := sel.Cells
	// The Sandbox image is the smallest variant that carries the suites'
	// tools: the twelve's, or the one with rustc, cargo, nodejs and npm.
	variant, err := vmimages.VariantFor(runtime.GOARCH, sel.Packages())
	if err != nil {
		return usageErrorf("sealbench suites says what each suite needs; docs/suites.md", "%v", err)
	}
	if f.samples < 1 || f.samples > maxSamples {
		return usageErrorf(fmt.Sprintf("--samples takes 1 to %d (default %d)", maxSamples, defaultSamples), "--samples %d is out of range", f.samples)
	}
	if err := f.fuseURing.check(names, f.engine); err != nil {
		return err
	}
	if err := f.debs.check(); err != nil {
		return err
	}
	if err := orchestrate.CheckBundleArgs(f.bundle, f.expect, "a run executes the bundle's binaries"); err != nil {
		return err
	}
	var signer *sign.Signer
	if f.signKey != "" {
		// The key is checked (and its password asked for) before anything
		// runs: a run must not end unable to sign what it took.
		pw, err := readPassword(g, false)
		if err != nil {
			return err
		}
		if signer, err = sign.LoadPrivateKey(f.signKey, pw); err != nil {
			return err
		}
	}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	p := newProgress(g.stderr, "run")
	defer p.Close()
	ntargets := max(1, len(names))
	rp := newRunProgress(p, ntargets, len(cellList), f.samples, f.verbose)
	detail := func(string, ...any) {}
	if f.verbose {
		detail = p.Logf
	}
	var rep *report.Report
	var reports []string
	g.outputs.Makes(cmp.Or(f.out, filepath.Join("out", "runs")))
	b, err := orchestrate.OpenBundle(ctx, orchestrate.BundleOptions{Dir: f.bundle, Source: f.source, SuiteDirs: f.suiteDirs, Key: f.key, Expect: f.expect, Insecure: f.insecure, Debs: f.debs.options(), Variant: variant, Log: p.Logf})
	if err != nil {
		return err
	}
	if b.Image.Lock != nil {
		if err := sel.CheckTools(b.Image.Lock.PackageNames()); err != nil {
			return usageErrorf("sealbench suites says what each suite needs; docs/suites.md", "%v", err)
		}
	}
	var defs []manifests.Suite
	for i, s := range extra {
		if err := s.SealedIn(b.Verified.Manifest); err != nil {
			return usageErrorf("seal it in: sealbench seal --suite-dir "+f.suiteDirs[i]+", or run with no --bundle (run seals the tree and the suite)", "--suite-dir %s: %v", f.suiteDirs[i], err)
		}
		defs = append(defs, *s.Def)
	}
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{
		Bundle: b, Targets: names, Specs: far, SSH: f.ssh.options(), Engine: f.engine, Name: f.name, Options: f.targetFlags.set,
		Suites: sel.Names(), SuiteDefs: defs, Cells: cellList, Samples: f.samples, Seed: f.seed, Native: f.native, Out: f.out, Keep: f.keep, FUSEURing: f.fuseURing.mode,
		SignKey: signer, Log: p.Logf, Status: rp.status, Done: rp.sample, Detail: detail,
		Report: func(r *report.Report, files []string) { rep, reports = r, files },
	})
	p.Close()
	if o != nil {
		g.outputs.Made(o.Dir)
	}
	switch {
	case o == nil:
		return err
	case g.json && err != nil:
		return &detailError{err, "run", o} // one JSON document: the error, with the outcome in it
	case g.json:
		return writeJSON(g.stdout, o)
	case o.Samples > 0:
		printRunSummary(g.stdout, o, rep, reports)
	}
	return err
}

// printRunSummary ends a run's console: the report's summary in plain
// lines (report.WriteConsole), then what the run left and where.
func printRunSummary(w io.Writer, o *orchestrate.RunOutcome, rep *report.Report, reports []string) {
	fmt.Fprintln(w)
	if rep != nil {
		report.WriteConsole(w, rep)
	}
	fmt.Fprintf(w, "%-9s%d samples, %d failed\n", "Samples:", o.Samples, o.Failed)
	removed := 0
	if o.Teardown != nil {
		removed = len(o.Teardown.Removed)
	}
	switch o.Audit.Verdict {
	case attest.AuditKept:
		fmt.Fprintf(w, "%-9skept up (--keep): sealbench teardown --run %s\n", "Targets:", o.Run)
	case attest.AuditClean:
		fmt.Fprintf(w, "%-9storn down (%d resources); the audit finds nothing left\n", "Audit:", removed)
	case attest.AuditLeftovers:
		fmt.Fprintf(w, "%-9sthe audit finds %d left (listed above): sealbench audit --run %s --fix\n", "Audit:", len(o.Leftovers), o.Run)
	default:
		fmt.Fprintf(w, "%-9s%s: %s\n", "Audit:", o.Audit.Verdict, o.Audit.Detail)
	}
	if len(reports) > 0 {
		fmt.Fprintf(w, "%-9s%s\n", "Reports:", strings.Join(reports, "  "))
	} else {
		fmt.Fprintf(w, "%-9s%s\n", "Results:", o.Dir)
	}
	if o.Attestation != "" {
		fmt.Fprintf(w, "%-9s%s\n", "Signed:", o.Attestation)
	}
}
