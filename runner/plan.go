package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	_ "github.com/sealbench/sealbench/runner/suites" // the built-in suites
)

// PlanOptions are what RunPlan needs besides the plan.
type PlanOptions struct {
	Log    func(string, ...any)
	Status func(string)
	Done   func(manifests.SampleDone, string) // each finished sample; unset: its line to Log
	// Executable is the runner's own file, hashed to check it is the one
	// the plan was made for; empty: os.Executable().
	Executable string
}

// MismatchError says the runner is not the one the plan names: its bytes
// differ from the signed manifest's digest that the host put in the plan.
type MismatchError struct {
	Path      string
	Got, Want manifests.Digest
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("this runner (%s, %s) is not the one the plan was made for (%s): refusing to take samples", e.Path, e.Got, e.Want)
}

// RunPlan is the bundle's runner at work (`sealbench sample --plan`):
// it checks that its own executable is the runner the plan names, opens
// the run's ledger to record every Sandbox in before creating it, and
// runs the plan with RunEngine, which takes the host-wide lock for each
// sample and writes samples.jsonl and pins.json into the plan's OutDir.
// The pins record this runner's own digest and platform.
func RunPlan(ctx context.Context, plan *manifests.RunPlan, o PlanOptions) ([]manifests.Sample, error) {
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding the runner's own executable: %w", err)
		}
	}
	_, self, err := manifests.HashFile(exe)
	if err != nil {
		return nil, fmt.Errorf("hashing the runner's own executable: %w", err)
	}
	if self != plan.RunnerSHA256 {
		return nil, &MismatchError{Path: exe, Got: self, Want: plan.RunnerSHA256}
	}
	if filepath.Base(plan.Ledger) != manifests.LedgerFile {
		return nil, fmt.Errorf("the plan's ledger %s is not a %s", plan.Ledger, manifests.LedgerFile)
	}
	led, err := ledger.Open(filepath.Dir(plan.Ledger))
	if err != nil {
		return nil, err
	}
	defer led.Close()
	if led.RunID() != plan.RunID {
		return nil, fmt.Errorf("the ledger %s is run %s's, the plan is for run %s", plan.Ledger, led.RunID(), plan.RunID)
	}
	suites, err := planSuites(plan)
	if err != nil {
		return nil, err
	}
	var ids []*engine.Identity
	for _, t := range plan.Targets {
		ids = append(ids, engine.IdentityOf(t))
	}
	tools := map[string]string{"sealbench": version.Version, "go": runtime.Version()}
	for k, v := range plan.Tools {
		if _, mine := tools[k]; !mine {
			tools[k] = v
		}
	}
	return RunEngine(ctx, EngineOptions{
		RunID: plan.RunID, Ledger: led, Targets: ids, BundleID: plan.BundleID, BundleOrigin: plan.BundleOrigin,
		Image:        engine.Image{Ref: plan.Image.Ref, ID: plan.Image.ID, Lock: plan.Image.Lock, Relocked: plan.Image.Relocked},
		RunnerSHA256: self, RunnerPlatform: runtime.GOOS + "/" + runtime.GOARCH, StandinSHA256: plan.StandinSHA256,
		Suites: suites, Cells: plan.Cells, Samples: plan.Samples, Seed: plan.Seed, Native: plan.Native,
		OutDir: plan.OutDir, LockPath: plan.Lock, Tools: tools, Log: o.Log, Status: o.Status, Done: o.Done,
	})
}

// planSuites are the plan's suites: built into this runner, or defined in
// the plan (a --suite-dir's, whose scripts the bundle holds).
func planSuites(plan *manifests.RunPlan) ([]*cells.Suite, error) {
	names := plan.Suites
	if len(names) == 0 {
		names = []string{manifests.DefaultSuite}
	}
	var out []*cells.Suite
	for _, n := range names {
		var s *cells.Suite
		for i := range plan.SuiteDefs {
			if plan.SuiteDefs[i].Name == n {
				s = cells.NewSuite(&plan.SuiteDefs[i], nil)
			}
		}
		if s == nil {
			var err error
			if s, err = cells.LookupSuite(n); err != nil {
				return nil, fmt.Errorf("the plan's suites: %w", err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
