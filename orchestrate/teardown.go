package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// TeardownOptions says which runs Teardown takes down: Run, or every run
// in the state directory when All.
type TeardownOptions struct {
	Run string
	All bool
	// Targets limits teardown to these targets' resources (their names
	// in the run); the run directories stay.
	Targets []string
	// SSH overrides how each run's hosts.json says its remote hosts are
	// reached.
	SSH      SSH
	StateDir string // empty: runs.DefaultStateDir
	Log      func(string, ...any)
	// Force tears down a run in progress too (one whose process holds its
	// lock, runs.LockFile); without it such a run is left as it is: with
	// All, said so in its result, with Run, an error.
	Force bool
}

// Teardown takes down every resource of the runs o names, from their
// ledgers, each run to the end whatever fails, and returns what each run's
// teardown did with every failure. A run in progress is left alone unless
// o.Force: each run's lock is taken for its teardown.
func Teardown(ctx context.Context, o TeardownOptions) ([]*runs.TeardownResult, error) {
	state := o.StateDir
	if state == "" {
		state = runs.DefaultStateDir()
	}
	if (o.Run == "") == !o.All {
		return nil, usagef("name one run with --run ID (ids are the directories in "+runs.RunsDir(state)+"), or pass --all",
			"teardown needs exactly one of --run and --all")
	}
	ids := []string{o.Run}
	if o.All {
		var err error
		if ids, err = runs.ListRuns(state); err != nil {
			return nil, err
		}
	} else if err := manifests.ValidateRunID(o.Run); err != nil {
		return nil, usagef("run ids look like 20261129T085500-3f9a1c", "--run: %v", err)
	}
	results := []*runs.TeardownResult{}
	var errs *multierror.Error
	logf := orNop(o.Log)
	for _, id := range ids {
		dir := filepath.Join(runs.RunsDir(state), id)
		release, err := runs.TakeOver(dir, o.Force)
		var ip *runs.InProgressError
		if errors.As(err, &ip) && o.All {
			logf("%v", err)
			results = append(results, &runs.TeardownResult{Run: id, InProgress: ip.Error()})
			continue
		}
		if err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		res, err := runs.Teardown(ctx, dir, runs.TeardownOptions{Targets: o.Targets, SSH: o.SSH.provision(), Log: o.Log})
		release()
		results = append(results, res)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("run %s: %w", id, err))
		}
	}
	if errs != nil {
		errs.ErrorFormat = runs.ListErrors
	}
	return results, errs.ErrorOrNil()
}
