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

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/report"
)

func newReportCmd(g *global) *cobra.Command {
	var format, baseline, out string
	var seed uint64
	var signing reportSigning
	c := &cobra.Command{
		Use:   "report RESULTS...",
		Short: "Compare targets from run results: exact counts first, then timings",
		Long: `Read the results of one or more runs and write the comparison: first the exact
counts per cell and target (FUSE requests, SQLite statements, files, bytes, Store
and overlay bytes, the verifier's result), with every difference between
targets flagged, since timings only compare the same work; then the timings
(command time, exec wall, per-exec overhead, mount, Commit, unmount, and, when
the run took a native reference, that and LayerFS over native: each sample's
command time divided by its native reference in the same Sandbox, the ratio
that where a target keeps its Sandboxes on the disk cannot skew), each with
its ratio to the baseline target and the geometric mean of the ratios over
the cells. With several
samples per cell, values are medians with bootstrap 95% intervals of the
paired ratio.

RESULTS are run directories (holding samples.jsonl and pins.json) or
samples.jsonl files (pins.json is read when it lies beside one). Runs of
different bundles are refused; each target may come from one run only.

Formats: md (Markdown, the default), html (one self-contained page with
inline SVG charts), json, csv (one tidy row per count and per timing value).
--json writes the JSON report to stdout, or, with --out, a JSON summary.
--out is written atomically, and never over the files the report reads
(samples.jsonl, pins.json): that is refused (exit 3) before anything is read.

Signed results: a run made with --sign-key leaves results.sigstore.json beside
its samples. The report checks it, here on the host, against the very bytes it
reports (their digests as they were parsed; nothing is read twice), and its
summary says what it found: verified (signed by --key, samples.jsonl and
pins.json as signed, of this run), unchecked (signed, no --key given), invalid
(another key, an altered sample or pins file, the attestation of another run),
or unsigned. --require-signed (with --key) refuses anything but verified, before
any report is written: exit 2 when the results are unsigned or not signed by
--key, exit 1 when they differ from what was signed.`,
		Example: `  # The comparison of one run, in Markdown, baseline the run's first target
  sealbench report out/runs/run-20261130T100000Z

  # An HTML page with charts, against the docker target
  sealbench report out/runs/run-20261130T100000Z --baseline docker --format html --out report.html

  # Only results signed by this key, unchanged since (exit 2 unsigned or another key, 1 altered)
  sealbench report out/runs/run-20261130T100000Z --key keys/sealbench.pub --require-signed

  # Two runs of the same bundle (one per target), as CSV
  sealbench report out/runs/run-a/samples.jsonl out/runs/run-b --format csv --out compare.csv`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("pass one or more run directories or samples.jsonl files", "no results given")
			}
			if g.json && !c.Flags().Changed("format") && out == "" {
				format = "json"
			}
			if !slices.Contains(report.Formats, format) {
				return usageErrorf("--format is one of "+strings.Join(report.Formats, ", "), "unknown format %q", format)
			}
			if g.json && out == "" && format != "json" {
				return usageErrorf("drop --json, or use --out to write the "+format+" report to a file", "--json prints JSON, but --format is %s", format)
			}
			if out != "" {
				if err := checkOutFile("--out", out, "write the report beside the results instead, e.g. --out RUN/report."+format, reportInputs(args)...); err != nil {
					return err
				}
			}
			verifier, err := signing.check()
			if err != nil {
				return err
			}
			inputs, err := report.Load(args)
			if err != nil {
				return inputError(err)
			}
			if err := signing.apply(inputs, verifier); err != nil {
				return err
			}
			r, err := report.Build(inputs, report.Options{Baseline: baseline, Seed: seed})
			if err != nil {
				return inputError(err)
			}
			var b bytes.Buffer
			if err := report.Write(&b, r, format); err != nil {
				return err
			}
			if len(r.Differences) > 0 {
				fmt.Fprintf(g.stderr, "sealbench: warning: %d count(s) differ between targets: those cells' timings do not compare the same work\n", len(r.Differences))
			}
			if out == "" {
				_, err := g.stdout.Write(b.Bytes())
				return err
			}
			if err := atomicfile.WriteFile(out, b.Bytes(), 0o644); err != nil {
				return fmt.Errorf("writing the report: %w", err)
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"out": out, "format": format, "baseline": r.Baseline,
					"targets": r.TargetNames(), "differences": len(r.Differences), "problems": len(r.Problems)})
			}
			fmt.Fprintf(g.stdout, "wrote %s (%s; baseline %s; %d difference(s) in counts)\n", out, format, r.Baseline, len(r.Differences))
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "md", "report format: "+strings.Join(report.Formats, ", "))
	c.Flags().StringVar(&baseline, "baseline", "", "the target ratios are to (default: the first target of the first run)")
	c.Flags().StringVar(&out, "out", "", "write the report to this file (atomically) instead of stdout")
	c.Flags().Uint64Var(&seed, "seed", 0, "bootstrap seed (default: the run's own seed)")
	signing.flags(c.Flags())
	return c
}

// reportInputs are the files report.Load reads for args: each run
// directory's samples.jsonl and pins.json, each samples file and the
// pins.json beside it.
func reportInputs(args []string) []string {
	var files []string
	for _, a := range args {
		dir := filepath.Dir(a)
		if fi, err := os.Stat(a); err == nil && fi.IsDir() {
			dir = a
			a = filepath.Join(a, manifests.SamplesFile)
		}
		files = append(files, a, filepath.Join(dir, manifests.PinsFile))
	}
	return files
}

// inputError marks results the report cannot use as unusable input (exit 3).
func inputError(err error) error {
	var ie *report.InputError
	if errors.As(err, &ie) {
		return &userError{Code: ExitUnusable, Err: err,
			Hint: "RESULTS are run directories (samples.jsonl and pins.json) or samples.jsonl files of one bundle, one run per target"}
	}
	return err
}
