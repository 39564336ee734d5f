//go:build !sealbench_bundle

package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/runner/report"
	"github.com/sealbench/sealbench/runner/report/benchstat"
)

// reportFlags are report's flags.
type reportFlags struct {
	format, baseline, out string
	seed                  uint64
	compare, insecure     bool
	match, cells          []string
	bounds                []string
	signing               reportSigning
	verifier              *sign.Verifier    // from --key, once check has run
	origins               map[string]string // a pulled run's directory: its oci:// reference by digest
}

func newReportCmd(g *global) *cobra.Command {
	var f reportFlags
	c := &cobra.Command{
		Use:   "report RESULTS... | report --compare OLD NEW",
		Short: "Compare targets from run results: the answer first, then exact counts, then timings",
		Long: `Read the results of one or more runs and write the comparison, the answer
first: a summary of what ran (bundle, targets, cells, samples), whether every
count matched across targets (and which cells did not), what differs between
the targets beyond the platform (CPUs, memory, kernel, emulation, transports,
and hosts that differ in kernel, CPUs or memory), and per target the headline
figures with their bootstrap 95% intervals: LayerFS over native and the
command time relative to the baseline, each a geometric mean over cells, and
the per-exec overhead (", through ssh" where the Engine was reached over SSH
or another transport than a local socket: the figure includes it); which
cells show a difference from the baseline and which do not; and, when the
host checked them, whether each run's results are signed. The provenance
groups the targets by host (ssh://user@host:port, or the run's own machine)
with their kernel, CPUs, memory, where the runner ran and the Engine
transport.

Then the exact counts, one row per cell and a column per count (FUSE
requests, SQLite statements, files, bytes, Store and overlay bytes, the
verifier's result): a value once where the targets agree, each target's
where they differ, marked as different work or as the kernels' doing, since
timings only compare the same work; the per-opcode detail folds away. Then
the timings (command time, exec wall, per-exec overhead, mount, Commit,
unmount, and, when the run took a native reference, that and LayerFS over
native: each sample's command time divided by its native reference in the
same Sandbox, the ratio that where a target keeps its Sandboxes on the disk
cannot skew), each with its ratio to the baseline target and the geometric
mean of the ratios over the cells. With several samples per cell, values are
medians with bootstrap 95% intervals; "~" marks a ratio whose interval
includes 1.0: no difference shown.

RESULTS are run directories (holding samples.jsonl and pins.json) or
samples.jsonl files (pins.json is read when it lies beside one), or oci://
references to results push --results published: pulled by digest into
~/.cache/sealbench/results/, their signature with them, then read as a run
directory. Runs of
different bundles are refused; each target may come from one run only.

--compare OLD NEW puts two runs side by side, as benchstat does: per cell and
target the old and new medians with their intervals, and the change (new over
old) with its interval, each run resampled on its own, "~" where that interval
includes no change; a geometric mean of the changes per target. The runs may
be of different bundles (each is named). Runs whose targets or cells differ
are refused unless --match names the target pairs (OLD=NEW, e.g. docker=lima)
and --cells the cells to compare.

Formats: md (Markdown, the default), html (one self-contained page with
inline SVG charts, no script, that fits a phone's width; the same input gives
the same bytes), json, csv (one tidy row per summary figure, count and timing
value), benchstat (every sample as a Go benchmark line, for benchstat and
other tools that read that format). One rule picks it: --format when given;
--json is --format json; else the --out file's extension (.md, .html, .json,
.csv); else md. A --json, --format and --out extension that disagree are
refused (exit 3); with --out, --json also prints a JSON line saying what was
written. --out never destroys: a regular file is written atomically (a
temporary file, then a rename); a fifo or a character device (/dev/null, a
terminal, /dev/stdout) is written into as a stream and stays what it was; a
symlink is followed and what it names is written so, the link kept (one that
names nothing is refused); a directory, a block device or a socket is refused;
and so is any of the files the report reads (samples.jsonl, pins.json,
results.sigstore.json), however spelled (symlinks resolved, hard links caught
by inode). Each refusal exits 3, before anything is read.

Signed results: a run made with --sign-key leaves results.sigstore.json beside
its samples. The report checks it, here on the host, against the very bytes it
reports (their digests as they were parsed; nothing is read twice), and its
summary says what it found: verified (signed by --key, samples.jsonl and
pins.json as signed, of this run), unchecked (signed, no --key given), invalid
(another key, an altered sample or pins file, the attestation of another run),
or unsigned. --require-signed (with --key) refuses anything but verified, for a
report and for --compare alike, before any report is written: exit 2 when the
results are unsigned or not signed by --key, exit 1 when they differ from what
was signed.

--bounds METRIC=LOW:HIGH (repeat it) holds every cell's median of that timing,
on every target, against the range (a ratio, or milliseconds for a duration),
and prints each with its interval and verdict instead of the report (which
--out still writes); exit 1 when any is outside. The timings: commandNs,
execWallNs, execOverheadNs, mountNs, commitNs, unmountNs, nativeNs,
layerfsOverNative, nativeRepeatOverNative (the A/A check).`,
		Example: `  # The comparison of one run, in Markdown, baseline the run's first target
  sealbench report out/runs/run-20261130T100000Z

  # An HTML page with charts, against the docker target
  sealbench report out/runs/run-20261130T100000Z --baseline docker --format html --out report.html

  # Only results signed by this key, unchanged since (exit 2 unsigned or another key, 1 altered)
  sealbench report out/runs/run-20261130T100000Z --key keys/sealbench.pub --require-signed

  # Two runs of the same bundle (one per target), as CSV
  sealbench report out/runs/run-a/samples.jsonl out/runs/run-b --format csv --out compare.csv

  # Last week's run against today's: what changed, and what did not
  sealbench report --compare out/runs/run-a out/runs/run-b

  # A run published with push --results, its signature checked
  sealbench report oci://registry.example.com/bench/results:2026-12-06 --key sealbench.pub --require-signed

  # Today's lima run against last week's local one, on two cells
  sealbench report --compare out/runs/run-a out/runs/run-b --match local=lima --cells C01,C06

  # Exit 1 unless every cell's LayerFS over native and A/A lie in these ranges (make bench-protocol)
  sealbench report out/bench-protocol --bounds layerfsOverNative=0.8:1.5 --bounds nativeRepeatOverNative=0.9:1.1`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.check(c, g, args); err != nil {
				return err
			}
			args, err := f.pullResults(c, g, args)
			if err != nil {
				return err
			}
			if f.compare {
				return runCompare(g, f, args[0], args[1])
			}
			inputs, err := f.loadResults(args)
			if err != nil {
				return err
			}
			r, err := report.Build(inputs, report.Options{Baseline: f.baseline, Seed: f.seed})
			if err != nil {
				return inputError(err)
			}
			var b bytes.Buffer
			if f.format == formatBenchstat {
				for _, in := range inputs {
					if err := benchstat.Write(&b, in.Samples); err != nil {
						return err
					}
				}
			} else if err := report.Write(&b, r, f.format); err != nil {
				return err
			}
			if len(f.bounds) > 0 {
				return checkBounds(g, f, r, b.Bytes())
			}
			// A difference the report explains (a FUSE implementation's or a
			// kernel's requests, a filesystem's directory records) is the
			// same work; only the others make timings incomparable.
			if n := r.Unexplained(); n > 0 {
				fmt.Fprintf(g.stderr, "sealbench: warning: %d count(s) differ between targets: those cells' timings do not compare the same work\n", n)
			}
			return writeReport(g, f, b.Bytes(), map[string]any{"baseline": r.Baseline, "targets": r.TargetNames(),
				"differences": len(r.Differences), "problems": len(r.Problems), "unsupported": len(r.Unsupported)},
				fmt.Sprintf("baseline %s; %d difference(s) in counts", r.Baseline, len(r.Differences)))
		},
	}
	c.Flags().StringVar(&f.format, "format", "md", "report format: "+strings.Join(reportFormats(), ", ")+" (default: the --out file's extension's, else md; --json is --format json)")
	c.Flags().StringVar(&f.baseline, "baseline", "", "the target ratios are to (default: the first target of the first run)")
	c.Flags().StringVar(&f.out, "out", "", "write the report to this file instead of stdout: a regular file atomically, a fifo or character device as a stream; a symlink is followed")
	c.Flags().Uint64Var(&f.seed, "seed", 0, "bootstrap seed (default: the run's own seed; with --compare, the new run's)")
	c.Flags().BoolVar(&f.compare, "compare", false, "compare two runs, OLD NEW: old and new medians, the change with its interval")
	c.Flags().StringSliceVar(&f.match, "match", nil, "with --compare: the target pairs to compare, OLD=NEW (repeat, or separate with commas); default: the same targets in both")
	c.Flags().StringSliceVar(&f.cells, "cells", nil, "with --compare: the cells to compare (default: every cell, the same in both runs)")
	c.Flags().StringArrayVar(&f.bounds, "bounds", nil, "METRIC=LOW:HIGH: exit 1 unless every cell's median of that timing lies in the range (repeat for more); prints the checks instead of the report")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "with oci:// results: allow plain HTTP to a registry that is not on loopback")
	f.signing.flags(c.Flags())
	return c
}

// pullResults replaces each oci:// reference among args with the run
// directory it was pulled into (the results cache); report then reads it,
// and checks its signature, as any run directory.
func (f *reportFlags) pullResults(c *cobra.Command, g *global, args []string) ([]string, error) {
	out := slices.Clone(args)
	for i, a := range args {
		if !ociartifact.IsRef(a) {
			continue
		}
		p := newProgress(g.stderr, "report")
		pulled, err := orchestrate.PullResults(c.Context(), a, f.insecure, p.Logf)
		p.Close()
		if err != nil {
			return nil, err
		}
		out[i] = pulled.Dir
		if f.origins == nil {
			f.origins = map[string]string{}
		}
		f.origins[pulled.Dir] = pulled.Reference
	}
	return out, nil
}

// check refuses flags and arguments that do not fit together, before
// anything is read.
func (f *reportFlags) check(c *cobra.Command, g *global, args []string) error {
	switch {
	case len(args) == 0:
		return usageErrorf("pass one or more run directories or samples.jsonl files", "no results given")
	case f.compare && len(args) != 2:
		return usageErrorf("pass the old run and the new one: --compare OLD NEW", "--compare takes two runs, got %d", len(args))
	case !f.compare && (len(f.match) > 0 || len(f.cells) > 0):
		return usageErrorf("--match and --cells choose what --compare compares", "--match and --cells need --compare")
	case f.compare && f.baseline != "":
		return usageErrorf("--compare compares each target with itself (or as --match pairs them)", "--baseline does not apply to --compare")
	case f.compare && len(f.bounds) > 0:
		return usageErrorf("--bounds checks one run's timings; drop --compare", "--bounds does not apply to --compare")
	}
	for _, b := range f.bounds {
		if _, err := report.ParseBound(b); err != nil {
			return usageErrorf("--bounds takes METRIC=LOW:HIGH, e.g. --bounds layerfsOverNative=0.8:1.5", "--bounds: %v", err)
		}
	}
	if err := f.pickFormat(c.Flags().Changed("format"), g.json); err != nil {
		return err
	}
	if f.compare && f.format == formatBenchstat {
		return usageErrorf("benchstat compares two runs itself: sealbench report --format benchstat OLD > old.txt, the same for NEW, then benchstat old.txt new.txt", "--format benchstat does not apply to --compare")
	}
	if f.out != "" {
		if err := checkOutFile("--out", f.out, "write the report beside the results instead, e.g. --out RUN/report."+f.format, reportInputs(args)...); err != nil {
			return err
		}
		g.outputs.Makes(f.out)
	}
	var err error
	f.verifier, err = f.signing.check()
	return err
}

// formatBenchstat is the Go benchmark format (package
// runner/report/benchstat), which benchstat reads.
const formatBenchstat = "benchstat"

// reportFormats are the formats report writes.
func reportFormats() []string { return append(slices.Clone(report.Formats), formatBenchstat) }

// formatOfExt is the format a file name's extension says, or "".
func formatOfExt(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".md", ".markdown":
		return "md"
	case ".html", ".htm":
		return "html"
	case ".json":
		return "json"
	case ".csv":
		return "csv"
	}
	return ""
}

// pickFormat settles the format by one rule: --format when given; --json
// is --format json; otherwise the --out file's extension's, else md. A
// --json, a --format and an --out extension that say different things are
// refused, before anything is read.
func (f *reportFlags) pickFormat(formatGiven, json bool) error {
	ext := formatOfExt(f.out)
	switch {
	case json && formatGiven && f.format != "json":
		return usageErrorf("--json is --format json: drop one of them", "--json and --format %s say different things", f.format)
	case json:
		f.format = "json"
	case !formatGiven && ext != "":
		f.format = ext
	}
	if !slices.Contains(reportFormats(), f.format) {
		return usageErrorf("--format is one of "+strings.Join(reportFormats(), ", "), "unknown format %q", f.format)
	}
	if ext != "" && ext != f.format {
		return usageErrorf("name the file for its format (--out report."+f.format+"), or choose the format its name says (--format "+ext+")",
			"--out %s is a .%s file, but the format is %s", f.out, ext, f.format)
	}
	return nil
}

// loadResults reads the results args name and checks their signed results
// (--key, --require-signed): the one place report reads them, for a report
// and for a comparison alike.
func (f *reportFlags) loadResults(args []string) ([]report.Input, error) {
	inputs, err := report.Load(args)
	if err != nil {
		return nil, inputError(err)
	}
	if err := f.signing.apply(inputs, f.verifier); err != nil {
		return nil, err
	}
	// Results pulled from a registry are named by their reference, not
	// by where the cache keeps them.
	for i := range inputs {
		if ref, ok := f.origins[inputs[i].Source]; ok {
			inputs[i].Source = ref
		}
	}
	return inputs, nil
}

// runCompare writes the comparison of two runs.
func runCompare(g *global, f reportFlags, oldPath, newPath string) error {
	var pairs []report.TargetPair
	for _, m := range f.match {
		p, err := report.ParseTargetPair(m)
		if err != nil {
			return usageErrorf("--match takes OLD=NEW target pairs, e.g. --match docker=lima", "%v", err)
		}
		pairs = append(pairs, p)
	}
	old, err := f.loadResults([]string{oldPath})
	if err != nil {
		return err
	}
	new, err := f.loadResults([]string{newPath})
	if err != nil {
		return err
	}
	if old[0].SamplesSHA256 == new[0].SamplesSHA256 {
		fmt.Fprintf(g.stderr, "sealbench: warning: OLD %s and NEW %s hold the same samples (%s): every change is no change by construction; compare two different runs\n",
			cliutil.Printable(oldPath), cliutil.Printable(newPath), old[0].SamplesSHA256)
	}
	cmp, err := report.Compare(old, new, report.CompareOptions{Pairs: pairs, Cells: f.cells, Seed: f.seed})
	if err != nil {
		return compareError(err)
	}
	var b bytes.Buffer
	if err := report.WriteComparison(&b, cmp, f.format); err != nil {
		return err
	}
	return writeReport(g, f, b.Bytes(), map[string]any{"pairs": cmp.Pairs, "cells": cmp.Cells, "warnings": len(cmp.Warnings)},
		fmt.Sprintf("comparison of %d target pair(s) over %d cell(s)", len(cmp.Pairs), len(cmp.Cells)))
}

// checkBounds holds r's timings against --bounds and prints the checks
// (as JSON with --json), writing the report only to --out; a median
// outside its bounds exits 1.
func checkBounds(g *global, f reportFlags, r *report.Report, rendered []byte) error {
	var bounds []report.Bound
	for _, s := range f.bounds {
		b, _ := report.ParseBound(s) // check parsed them
		bounds = append(bounds, b)
	}
	checks, err := r.CheckBounds(bounds)
	if err != nil {
		return inputError(err)
	}
	if f.out != "" {
		if err := atomicfile.WriteOutput(f.out, printable(f.format, rendered), 0o644); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	outside := 0
	if g.json {
		for _, c := range checks {
			if !c.Within {
				outside++
			}
		}
		if err := writeJSON(g.stdout, map[string]any{"checks": checks, "outside": outside, "out": f.out}); err != nil {
			return err
		}
	} else if outside, err = report.WriteBounds(g.stdout, checks); err != nil {
		return err
	}
	if outside > 0 {
		return &userError{Code: ExitMismatch, Err: fmt.Errorf("%d of %d medians outside their bounds", outside, len(checks)),
			Hint: "each OUTSIDE line names the timing, cell and target; the report's notes say what the samples recorded about them"}
	}
	return nil
}

// writeReport writes a rendered report to stdout, or to --out with a line
// (or, with --json, a JSON summary) saying what was written.
func writeReport(g *global, f reportFlags, b []byte, summary map[string]any, what string) error {
	b = printable(f.format, b)
	if f.out == "" {
		_, err := g.stdout.Write(b)
		return err
	}
	if err := atomicfile.WriteOutput(f.out, b, 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if g.json {
		summary["out"], summary["format"] = f.out, f.format
		return writeJSON(g.stdout, summary)
	}
	fmt.Fprintf(g.stdout, "wrote %s (%s; %s)\n", f.out, f.format, what)
	return nil
}

// printable escapes the control characters (ESC and the like) that text
// from the results (a tool's version, a kernel's name, a label) may have
// brought into a rendered report, as \x1b: a report is read on terminals.
// JSON escapes them itself.
func printable(format string, b []byte) []byte {
	if format == "json" {
		return b
	}
	return []byte(cliutil.PrintableText(string(b)))
}

// reportInputs are the files report reads for args: each run directory's
// samples.jsonl, pins.json and results.sigstore.json, each samples file
// and the pins.json and results.sigstore.json beside it.
func reportInputs(args []string) []string {
	var files []string
	for _, a := range args {
		dir := filepath.Dir(a)
		if fi, err := os.Stat(a); err == nil && fi.IsDir() {
			dir = a
			a = filepath.Join(a, manifests.SamplesFile)
		}
		files = append(files, a, filepath.Join(dir, manifests.PinsFile), filepath.Join(dir, attest.ResultsFile))
	}
	return files
}

// inputError marks results the report cannot use as unusable input (exit 3).
func inputError(err error) error {
	return unusable(err, "RESULTS are run directories (samples.jsonl and pins.json) or samples.jsonl files of one bundle, one run per target")
}

// compareError marks runs Compare cannot put side by side as unusable
// input (exit 3), with the flags that choose what to compare.
func compareError(err error) error {
	return unusable(err, "OLD and NEW are run directories or samples.jsonl files; --match OLD=NEW pairs targets, --cells names the cells both runs have")
}

func unusable(err error, hint string) error {
	var ie *report.InputError
	if errors.As(err, &ie) {
		return &userError{Code: ExitUnusable, Err: err, Hint: hint}
	}
	return err
}
