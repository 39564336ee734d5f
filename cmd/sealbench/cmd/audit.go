//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// ExitLeftovers is audit's exit code when something is left.
const ExitLeftovers = 1

func newAuditCmd(g *global) *cobra.Command {
	var runID string
	var fix, force bool
	var sc scope
	c := &cobra.Command{
		Use:   "audit [--target T,...] [--run ID] [--fix]",
		Short: "Prove nothing of sealbench is left, or list what is (exit 1)",
		Long: `Ask every backend for anything sealbench made that is still there: each run's
ledger entries whose resource still exists (processes, containers, images,
volumes, sockets, state, directories, VMs, pods), what each target's backend
finds carrying the sealbench.run label, mounts and processes under the run
directories, and directories under runs/ without a ledger. A target left up by
` + "`sealbench provision`" + ` counts: audit is the check that nothing is.

Remote hosts are asked over SSH: those a run's ledger names, and every host a
run here ever used (the state directory's hosts.history), for what is labelled
sealbench.run there; a history host that cannot be reached is a note, a
ledger's a leftover. --target limits the audit to those targets (a remote
spec asks that host, and fails if it cannot be reached); --run ID to that
run.

Exit codes for audit: 0 nothing left; 1 something is left (each listed);
3 bad input, such as a --run that names no run made here (the state
directory's runs.history lists every run made in it, torn down or not).
--fix tears down what it finds (every run through its ledger, then what no
ledger names) and exits 0 only if nothing is left afterwards. A run in
progress (its process holds its lock, run.lock in the run directory) is
listed with a note, and --fix leaves it and everything of it as it is, unless
--force. A labelled container of a run this state directory never made is
listed as foreign ("foreign": true in --json): --fix removes it when it is not
running, and a running one (perhaps another state directory's run in
progress) only with --force.`,
		Example: `  sealbench audit
  sealbench audit --json
  sealbench audit --run 20261129T085500-3f9a1c
  sealbench audit --target ` + remoteExample() + ` --ssh-known-hosts ~/.ssh/known_hosts
  sealbench audit --fix            # after a crash: remove what was left`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if force && !fix {
				return usageErrorf("--force goes with --fix: sealbench audit --fix --force", "--force without --fix")
			}
			opts := runs.AuditOptions{StateDir: runs.DefaultStateDir(), Run: runID, SSH: runs.SSHOptions{Identity: sc.ssh.identity, KnownHosts: sc.ssh.knownHosts}, Force: force}
			if runID != "" {
				if err := manifests.ValidateRunID(runID); err != nil {
					return usageErrorf("run ids look like 20261129T085500-3f9a1c", "--run: %v", err)
				}
			}
			specs, err := sc.specs()
			if err != nil {
				return err
			}
			opts.Targets = orchestrate.Names(specs)
			for _, s := range specs {
				if s.Host != nil {
					opts.Hosts = append(opts.Hosts, s.Host.String())
				}
			}
			if err := sc.check(); err != nil {
				return err
			}
			var res *runs.AuditResult
			var fixErr error
			if fix {
				p := newProgress(g.stderr, "audit --fix")
				res, fixErr = runs.Fix(c.Context(), opts, p.Logf)
				p.Close()
			} else {
				var err error
				if res, err = runs.Audit(c.Context(), opts); err != nil {
					return err
				}
			}
			if res == nil {
				return fixErr
			}
			if res.Leftovers == nil {
				res.Leftovers = []runs.Resource{}
			}
			if runID != "" && len(res.Leftovers) == 0 && fixErr == nil && !runs.RunKnown(opts.StateDir, runID) {
				return usageErrorf("check the id: provision and run print it, and "+filepath.Join(opts.StateDir, runs.HistoryFile)+" lists every run made here; or run `sealbench audit` for all of them",
					"run %s is unknown: no run of that id was made in %s, and nothing of it is left", runID, opts.StateDir)
			}
			if g.json && len(res.Leftovers) == 0 && fixErr == nil {
				return writeJSON(g.stdout, res)
			}
			if !g.json {
				for _, n := range res.Notes {
					fmt.Fprintf(g.stderr, "note: %s\n", cliutil.Printable(n))
				}
				for _, r := range res.Leftovers {
					fmt.Fprintf(g.stdout, "left: %s\n", cliutil.Printable(fmt.Sprint(r)))
				}
				if len(res.Leftovers) == 0 {
					fmt.Fprintf(g.stdout, "nothing left (state directory %s)\n", opts.StateDir)
				}
			}
			if fixErr != nil {
				return &detailError{&userError{Code: ExitLeftovers, Err: fmt.Errorf("audit --fix: %w", fixErr),
					Hint: "fix the causes above and run `sealbench audit --fix` again"}, "leftovers", res.Leftovers}
			}
			if len(res.Leftovers) > 0 {
				hint := "run `sealbench teardown --run ID` for each run listed, or `sealbench audit --fix`"
				if fix {
					hint = "these resisted --fix; remove them by hand"
				}
				return &detailError{&userError{Code: ExitLeftovers, Err: fmt.Errorf("%d leftovers", len(res.Leftovers)), Hint: hint}, "leftovers", res.Leftovers}
			}
			return nil
		},
	}
	sc.flags(c.Flags(), provision.CommandAudit, "audit only these targets, comma-separated: "+strings.Join(provision.Names(), ", ")+" (default: all)")
	c.Flags().BoolVar(&fix, "fix", false, "tear down what is found (but runs in progress)")
	c.Flags().BoolVar(&force, "force", false, "with --fix, tear down runs in progress too (another process holds their lock)")
	c.Flags().StringVar(&runID, "run", "", "audit (and fix) only this run")
	return c
}

// detailError adds one field to the --json error output (the leftovers
// of an audit, the results of a teardown), keeping the error's exit code.
type detailError struct {
	err   error
	key   string
	value any
}

func (e *detailError) Error() string             { return e.err.Error() }
func (e *detailError) Unwrap() error             { return e.err }
func (e *detailError) JSONDetail() (string, any) { return e.key, e.value }
