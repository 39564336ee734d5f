//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runner/report"
)

func newRunCmd(g *global) *cobra.Command {
	var engine, name, bundlePath, key, expect, out, cells string
	var native bool
	var samples int
	var seed uint64
	c := &cobra.Command{
		Use:   "run --engine URL --bundle DIR",
		Short: "Run the twelve cells on an Engine that is already up (a stand-in or dockerd)",
		Long: `Run the cells under the cache protocol on one Engine endpoint that already
exists (a target left up by ` + "`sealbench provision`" + `, a stand-in started by hand,
or a dockerd), loading the bundle's Sandbox image into it if it lacks it.

Per cell and sample: a fresh Sandbox from the pinned image (its id checked);
sha256sum -c of the bundle inside it with the image's own tools; a Disposable
Store with the cell's base imported; an untimed warm-up mount, run and
unmount; a fresh mount (timed), the body as uid 65534 with no capabilities
(timed on the Sandbox's clock and as exec wall time here), the verifier,
telemetry, Commit and unmount (timed); the same body on a plain directory when
--native. One attempt per step; a failed cell is kept as failed. A host-wide
lock keeps samples from overlapping. The run directory gets samples.jsonl
(each sample fsync'd as it completes), pins.json and report.md.

Provisioning, several targets and teardown around a run are not here yet:
provision first, then run, then ` + "`sealbench teardown`" + `.`,
		Example: `  sealbench provision local --bundle out/build-linux-0123456789ab --json > local.json
  sealbench run --engine unix:///var/lib/sealbench/runs/<run>/local/sock/standin.sock --name local \
    --bundle out/build-linux-0123456789ab --cells C01,C06,C12 --native
  DOCKER_HOST=unix:///run/sealbench-dockerd/docker.sock \
    sealbench run --engine "$DOCKER_HOST" --name docker --bundle out/build-linux-0123456789ab --samples 3`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if engine == "" || bundlePath == "" {
				return usageErrorf("pass --engine unix:///path/to/socket and --bundle out/build-linux-<hash>", "--engine and --bundle are required")
			}
			cellList, err := runner.ParseCells(cells)
			if err != nil {
				return usageErrorf("cells are C01 to C12, comma-separated", "%v", err)
			}
			if seed == 0 {
				seed = uint64(time.Now().UnixNano())
			}
			if samples < 1 {
				return usageErrorf("", "--samples must be at least 1")
			}
			v, err := loadVerifier(key)
			if err != nil {
				return err
			}
			p := newProgress(g.stderr, "run")
			defer p.Close()
			res, err := bundle.VerifyDir(c.Context(), bundlePath, bundle.VerifyOptions{Verifier: v, Expect: expect})
			if err != nil {
				return err
			}
			p.Logf("verified %s", res.Name)
			img, err := sandboxImage(c.Context(), p, bundlePath, key, res)
			if err != nil {
				return err
			}
			cli, err := client.NewClientWithOpts(client.WithHost(engine), client.WithAPIVersionNegotiation())
			if err != nil {
				return usageErrorf("--engine takes a URL such as unix:///run/standin.sock", "%v", err)
			}
			defer cli.Close()
			// Load the image when the Engine lacks it, or holds another image
			// under its tag (a bundle of the same name signed by another key
			// makes another image); the run then checks the id it reports.
			if have, err := cli.ImageInspect(c.Context(), img.Ref); err != nil || have.ID != img.ID.String() {
				p.Logf("loading %s into %s", img.Ref, engine)
				f, err := os.Open(img.Tar)
				if err != nil {
					return err
				}
				resp, err := cli.ImageLoad(c.Context(), f)
				if err != nil {
					f.Close()
					return fmt.Errorf("loading the Sandbox image into %s: %w", engine, err)
				}
				// The load finishes when its progress stream ends.
				msgs, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				f.Close()
				if err != nil || strings.Contains(string(msgs), `"errorDetail"`) {
					return fmt.Errorf("loading the Sandbox image into %s: %v %s", engine, err, strings.TrimSpace(string(msgs)))
				}
			}
			runID := provision.NewRunID()
			if out == "" {
				out = filepath.Join("out", "runs", runID)
			}
			digest := func(p string) manifests.Digest {
				f, _ := res.Manifest.File(p)
				return f.Digest
			}
			arch := "bin/linux-" + runtime.GOARCH + "/"
			samplesOut, err := runner.RunEngine(c.Context(), runner.EngineOptions{
				Engine: engine, Target: name, RunID: runID, BundleID: res.Name,
				ImageRef: img.Ref, ImageID: img.ID,
				RunnerSHA256: digest(arch + "sealbench"), StandinSHA256: digest(arch + "standin"),
				Cells: cellList, Samples: samples, Seed: seed, Native: native, OutDir: out, Log: p.Logf,
			})
			if err != nil {
				return fmt.Errorf("run %s (results so far in %s): %w", runID, out, err)
			}
			inputs, err := report.Load([]string{out})
			if err != nil {
				return err
			}
			rep, err := report.Build(inputs, report.Options{})
			if err != nil {
				return err
			}
			var md strings.Builder
			if err := report.Write(&md, rep, "md"); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(filepath.Join(out, "report.md"), []byte(md.String()), 0o644); err != nil {
				return err
			}
			p.Close()
			failed := 0
			for _, s := range samplesOut {
				if s.Status != manifests.StatusOK {
					failed++
				}
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"run": runID, "dir": out, "samples": len(samplesOut), "failed": failed})
			}
			fmt.Fprint(g.stdout, md.String())
			fmt.Fprintf(g.stdout, "\nrun %s: %d samples, %d failed; results in %s\n", runID, len(samplesOut), failed, out)
			if failed > 0 {
				return &userError{Code: ExitMismatch, Err: fmt.Errorf("%d of %d samples failed", failed, len(samplesOut)), Hint: "each failed sample's reason is in " + filepath.Join(out, "samples.jsonl")}
			}
			return nil
		},
	}
	c.Flags().StringVar(&engine, "engine", "", "Engine API endpoint (unix:///path/to/socket)")
	c.Flags().StringVar(&name, "name", "target", "the target's name in the results")
	c.Flags().StringVar(&bundlePath, "bundle", "", "verified bundle directory (its Sandbox image is <bundle>.image/)")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), "sealbench.pub"), "public key to verify the bundle with")
	c.Flags().StringVar(&expect, "id", "", "pin the bundle: refuse any other (build-linux-<hash>)")
	c.Flags().StringVar(&out, "out", "", "run directory (default out/runs/<run id>)")
	c.Flags().StringVar(&cells, "cells", "", "cells to run, e.g. C01,C06 (default all twelve)")
	c.Flags().BoolVar(&native, "native", false, "also run each body on a plain directory in the same Sandbox")
	c.Flags().IntVar(&samples, "samples", 1, "samples per cell, interleaved in a seeded random order")
	c.Flags().Uint64Var(&seed, "seed", 0, "seed of the interleaving (0: one from the clock; recorded in pins.json)")
	return c
}
