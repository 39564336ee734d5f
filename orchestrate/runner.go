package orchestrate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runs"
)

// The sealed runner. The host process keeps what needs keys or host tools
// (verify, provision, teardown, audit, report); the samples are taken by
// the bundle's own runner for this host's OS and architecture, run from a
// private copy in the run's directory whose digest is checked against the
// verified manifest as it is copied. The contract between the two sides
// is manifests.RunPlan.
const (
	planFile  = "plan.json"
	runnerDir = "runner"
	// runnerGrace is how long the runner has, after SIGINT, to finish the
	// sample under way (its Sandbox removed) before it is killed.
	runnerGrace = 2 * time.Minute
)

// newPlan is the plan of run for the targets ids: what RunOptions ask for,
// with absolute paths (the runner's working directory is not ours). The
// runner's digest is filled in as its copy is made.
func newPlan(run *runs.Run, b *Bundle, o RunOptions, ids []*engine.Identity, out string) (*manifests.RunPlan, error) {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(absOut, 0o755); err != nil {
		return nil, err
	}
	standin, _ := b.Verified.Manifest.File("bin/linux-" + runtime.GOARCH + "/standin")
	plan := basePlan(run, b, o)
	plan.Ledger, plan.Lock, plan.OutDir, plan.StandinSHA256 = filepath.Join(run.Dir, manifests.LedgerFile), runner.DefaultLockPath, absOut, standin.Digest
	for _, id := range ids {
		plan.Targets = append(plan.Targets, id.Plan())
	}
	return plan, nil
}

// basePlan is what every runner's plan of run says, wherever it runs.
func basePlan(run *runs.Run, b *Bundle, o RunOptions) *manifests.RunPlan {
	return &manifests.RunPlan{
		FormatVersion: manifests.ResultsFormatVersion, Kind: manifests.RunPlanKind,
		RunID: run.ID, BundleID: b.Verified.Name,
		Image:  manifests.PlanImage{ID: b.Image.ID, Ref: b.Image.Ref, Lock: b.Image.Lock, Relocked: b.Image.Relocked},
		Suites: o.Suites, SuiteDefs: o.SuiteDefs, Cells: o.Cells, Samples: o.Samples, Seed: o.Seed, Native: o.Native, BundleOrigin: b.Origin,
		Tools: map[string]string{"host.sealbench": version.Version, "host.go": runtime.Version()},
	}
}

// runSealed copies the bundle's runner into the run's directory, writes
// plan there, starts the copy, shows its progress and waits for it. A
// group's runner beside this machine's (a Kubernetes node's: name is
// group.name(), node-NODE) has its copy and plan named for it; name is ""
// or "local" for this machine's. A cancelled ctx (Ctrl-C) is forwarded as
// SIGINT. It returns the samples the
// runner wrote, and an error when the runner could not take them all: the
// context's when interrupted. Failed samples are not an error here.
func runSealed(ctx context.Context, run *runs.Run, b *Bundle, plan *manifests.RunPlan, name string, logf func(string, ...any), status func(string), done sampleDone) ([]manifests.Sample, error) {
	dir, planName := runnerDir, planFile
	if name != "" && name != "local" {
		dir, planName = runnerDir+"-"+name, strings.TrimSuffix(planFile, ".json")+"-"+name+".json"
	}
	exe, digest, err := copyRunner(b, filepath.Join(run.Dir, dir))
	if err != nil {
		return nil, err
	}
	plan.RunnerSHA256 = digest
	if err := plan.Validate(); err != nil {
		return nil, fmt.Errorf("the run plan is invalid (a bug): %w", err)
	}
	pb, err := plan.Marshal()
	if err != nil {
		return nil, err
	}
	planPath := filepath.Join(run.Dir, planName)
	if err := atomicfile.WriteFile(planPath, pb, 0o600); err != nil {
		return nil, fmt.Errorf("writing the run plan: %w", err)
	}
	logf("sampling with the bundle's runner %s (%s), plan %s", bundle.RunnerPath(runtime.GOOS, runtime.GOARCH), digest.Short(16), planPath)
	runErr := startRunner(ctx, exe, planPath, logf, status, done)
	// The runner appended its Sandboxes to the ledger: read them (a
	// Record here would too; Entries needs them now).
	if err := run.Refresh(); err != nil && runErr == nil {
		runErr = fmt.Errorf("reading the run's ledger after the runner: %w", err)
	}
	samples, err := readSamples(filepath.Join(plan.OutDir, manifests.SamplesFile))
	if err != nil && runErr == nil {
		runErr = err
	}
	return samples, runErr
}

// copyRunner copies the bundle's runner for this host into dir, hashing
// it as it is copied: bytes that differ from the verified manifest's
// entry (the file changed after verification) are refused before any
// sample, and no copy is left. It returns the copy and its digest.
func copyRunner(b *Bundle, dir string) (string, manifests.Digest, error) {
	rel := bundle.RunnerPath(runtime.GOOS, runtime.GOARCH)
	want, ok := b.Verified.Manifest.File(rel)
	if !ok {
		return "", manifests.Digest{}, &cliutil.UserError{Code: cliutil.ExitUnusable,
			Err:  fmt.Errorf("bundle %s has no runner for %s/%s (no %s): it was sealed for %s", b.Verified.Name, runtime.GOOS, runtime.GOARCH, rel, strings.Join(b.Verified.Manifest.Source.Platforms, ", ")),
			Hint: "seal the bundle with this sealbench, which builds the runner for every platform it runs on"}
	}
	src, err := os.Open(filepath.Join(b.Dir, filepath.FromSlash(rel)))
	if err != nil {
		return "", manifests.Digest{}, fmt.Errorf("opening the bundle's runner: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", manifests.Digest{}, err
	}
	dst := filepath.Join(dir, "sealbench")
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return "", manifests.Digest{}, fmt.Errorf("copying the bundle's runner: %w", err)
	}
	_, err = io.Copy(out, manifests.NewVerifyingReader(src, want.Size, want.Digest))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		var mm *manifests.MismatchError
		if errors.As(err, &mm) {
			return "", manifests.Digest{}, &cliutil.UserError{Code: ExitMismatch,
				Err:  fmt.Errorf("the bundle's runner %s is not the file that was verified (%v): refusing to take samples with it", rel, err),
				Hint: "something changed the bundle after it was verified; verify it again, or seal a new one"}
		}
		return "", manifests.Digest{}, fmt.Errorf("copying the bundle's runner: %w", err)
	}
	return dst, want.Digest, nil
}

// startRunner runs `exe sample --plan planPath` (see runnerProcAttr),
// passes its progress lines on, and says how it ended.
func startRunner(ctx context.Context, exe, planPath string, logf func(string, ...any), status func(string), done sampleDone) error {
	cmd := exec.CommandContext(ctx, exe, "sample", "--plan", planPath)
	cmd.SysProcAttr = runnerProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = runnerGrace
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = nil // the runner writes nothing there without --json
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the bundle's runner: %w", err)
	}
	last := relayProgress(stderr, logf, status, done)
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &ee):
		return exitError(ee.ExitCode(), last)
	default:
		return fmt.Errorf("the bundle's runner: %w", err)
	}
}

// exitError says what a runner's exit code means for the run; last is
// the end of what it said that was not progress.
func exitError(code int, last string) error {
	switch {
	case code == manifests.ExitRunnerSampleFail:
		return nil // failed samples are in samples.jsonl, each with its reason
	case code == manifests.ExitRunnerInterrupted:
		return fmt.Errorf("the runner was interrupted: %w", context.Canceled)
	case code == manifests.ExitRunnerBadPlan && strings.Contains(last, `unknown command "sample"`):
		return &cliutil.UserError{Code: cliutil.ExitUnusable, Err: fmt.Errorf("the bundle's runner cannot take samples (%s): the bundle was sealed before its runner did", last),
			Hint: "seal the bundle again with this sealbench"}
	default:
		return fmt.Errorf("the bundle's runner exited %d: %s", code, last)
	}
}

// sampleDone hears a runner's finished sample, with the line that says
// how it went.
type sampleDone func(manifests.SampleDone, string)

// relayProgress reads the runner's stderr to EOF: progress lines go to
// logf and status, finished samples to done; any other line (an error, a
// panic) is logged as it is. It returns the last few such lines, which say
// why a runner failed.
func relayProgress(r io.Reader, logf func(string, ...any), status func(string), done sampleDone) string {
	var other []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var p manifests.ProgressLine
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &p) == nil && (p.Log != "" || p.Status != "") {
			switch {
			case p.Sample != nil:
				done(*p.Sample, p.Log)
			case p.Log != "":
				logf("%s", p.Log)
			}
			if p.Status != "" {
				status(p.Status)
			}
			continue
		}
		logf("runner: %s", line)
		if other = append(other, strings.TrimSpace(line)); len(other) > 5 {
			other = other[1:]
		}
	}
	if len(other) == 0 {
		return "no message"
	}
	return strings.Join(other, "; ")
}

// readSamples reads the samples a runner wrote; none when it wrote no file.
func readSamples(path string) ([]manifests.Sample, error) {
	s, err := manifests.ReadSamplesFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the runner's samples: %w", err)
	}
	return s, nil
}
