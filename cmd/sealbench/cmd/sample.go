package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner"
)

func newSampleCmd(g *global) *cobra.Command {
	var plan string
	c := &cobra.Command{
		Use:   "sample --plan FILE",
		Short: "Take a run's samples as its plan says (the bundle's runner, started by `run`)",
		Long: `Take the samples of one run: the bundle's own runner at work.

` + "`sealbench run`" + ` verifies the bundle, provisions the targets, copies this binary
out of the bundle (checking its digest against the signed manifest as it
copies), writes a plan and starts the copy as ` + "`sealbench sample --plan FILE`" + `.
The runner checks that its own bytes are the ones the plan names, takes the
host-wide lock for each sample, records every Sandbox in the run's ledger
before creating it, runs the cells under the cache protocol, writes each
sample to the plan's samples.jsonl as it completes and pins.json (with its own
digest) at the start and the end. Progress goes to stderr as JSON lines
({"log": ...} or {"status": ...}), which ` + "`run`" + ` shows. A plan with
stopOnStdinEOF (a runner started over SSH on a remote host) stops the runner
at the sample under way when its stdin reaches EOF, as SIGINT does: the host
keeps it open for the run, so a lost connection stops the runner.

You do not need to run it yourself: ` + "`run`" + ` does, and tears down afterwards
whatever its exit. The plan's format is manifests.RunPlan (kind
"sealbench.plan").

Exit codes for sample: 0 every sample passed; 1 a sample failed (each is kept,
with its reason); 3 the plan is unreadable or invalid, or was made for another
runner; 4 the run could not go on (an Engine, the ledger, the results
directory); 130 interrupted (the samples so far are on disk).`,
		Example: `  # What run does after provisioning (the plan and the copy live in the run's directory):
  /var/lib/sealbench/runs/20261201T180000-3f9a1c/runner/sealbench sample \
    --plan /var/lib/sealbench/runs/20261201T180000-3f9a1c/plan.json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return takeSamples(c.Context(), g, plan, c.InOrStdin()) },
	}
	c.Flags().StringVar(&plan, "plan", "", "the run plan (JSON, written by sealbench run)")
	return c
}

func takeSamples(ctx context.Context, g *global, planPath string, stdin io.Reader) error {
	if planPath == "" {
		return usageErrorf("sealbench sample --plan /var/lib/sealbench/runs/ID/plan.json", "--plan is required")
	}
	f, err := manifests.OpenRegular(planPath)
	if err != nil {
		return usageErrorf("pass the plan file `sealbench run` wrote (plan.json in the run's directory)", "reading the plan: %v", err)
	}
	plan, err := manifests.ReadRunPlan(f)
	f.Close()
	if err != nil {
		return &cliutil.UserError{Code: manifests.ExitRunnerBadPlan, Err: fmt.Errorf("%s: %w", planPath, err)}
	}
	ctx, stop := stopWithParent(ctx)
	defer stop()
	if plan.StopOnStdinEOF {
		ctx = stopOnEOF(ctx, stdin)
	}
	pw := &progressWriter{w: g.stderr}
	samples, err := runner.RunPlan(ctx, plan, runner.PlanOptions{Log: pw.logf, Status: pw.status, Done: pw.done})
	var mismatch *runner.MismatchError
	switch {
	case errors.As(err, &mismatch):
		return &cliutil.UserError{Code: manifests.ExitRunnerBadPlan, Err: err}
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return &cliutil.UserError{Code: manifests.ExitRunnerFailed, Err: err}
	}
	failed := 0
	for _, s := range samples {
		if s.Failed() {
			failed++
		}
	}
	if g.json {
		if err := writeJSON(g.stdout, map[string]any{"run": plan.RunID, "samples": len(samples), "failed": failed, "dir": plan.OutDir}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &cliutil.UserError{Code: manifests.ExitRunnerSampleFail, Err: fmt.Errorf("%d of %d samples failed", failed, len(samples))}
	}
	return nil
}

// stopWithParent returns a context that ends when ctx does or when the
// process that started this one is gone (it was reparented): a runner
// whose host died stops at once rather than go on creating Sandboxes
// while a teardown removes the run's. On Linux the host also asks the
// kernel to kill the runner when it dies; this covers other systems.
func stopWithParent(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	parent := os.Getppid()
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != parent {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

// stopOnEOF returns a context that ends when ctx does or when r reaches
// EOF (or fails): a runner started over SSH with its stdin kept open for
// the run stops when the connection is lost, at the sample under way.
// Whatever r carries is read and dropped.
func stopOnEOF(ctx context.Context, r io.Reader) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		_, err := io.Copy(io.Discard, r)
		if err == nil {
			err = io.EOF
		}
		cancel(fmt.Errorf("stdin closed (%v): the host that started the runner is gone", err))
	}()
	return ctx
}

// progressWriter writes the runner's progress as manifests.ProgressLine
// JSON lines, one write per line.
type progressWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *progressWriter) write(l manifests.ProgressLine) {
	b, _ := json.Marshal(l)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Write(append(b, '\n'))
}

func (p *progressWriter) logf(format string, args ...any) {
	p.write(manifests.ProgressLine{Log: fmt.Sprintf(format, args...)})
}

func (p *progressWriter) status(s string) { p.write(manifests.ProgressLine{Status: s}) }

func (p *progressWriter) done(d manifests.SampleDone, line string) {
	p.write(manifests.ProgressLine{Log: line, Sample: &d})
}
