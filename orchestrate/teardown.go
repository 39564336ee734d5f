package orchestrate

import (
	"context"
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
}

// Teardown takes down every resource of the runs o names, from their
// ledgers, each run to the end whatever fails, and returns what each run's
// teardown did with every failure.
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
	for _, id := range ids {
		res, err := runs.Teardown(ctx, filepath.Join(runs.RunsDir(state), id), runs.TeardownOptions{Targets: o.Targets, SSH: o.SSH.provision(), Log: o.Log})
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
