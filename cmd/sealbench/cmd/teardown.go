//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

func newTeardownCmd(g *global) *cobra.Command {
	var runID string
	var all, force bool
	var sc scope
	c := &cobra.Command{
		Use:   "teardown --run ID | --all [--target T,...]",
		Short: "Remove everything a run created, from its ledger",
		Long: `Remove every resource the run's ledger names, newest first: the Sandbox
containers, the images the run loaded, the stand-in process (only if it is
still the process the ledger names: its binary and argv, never a recycled pid),
its socket, state and mounts, and finally the run directory itself.

Teardown keeps going past a failure and reports every failure at the end, each
naming its resource; the run directory (with the ledger) is then kept, so you
can fix the cause and run teardown again. A run that is gone already is done:
teardown is safe to run twice. Run directories live under $SEALBENCH_STATE_DIR
(default /var/lib/sealbench as root, ~/.local/state/sealbench otherwise).

Resources on a remote host (the ledger names the host) are removed over SSH,
reached as the run's hosts.json says (the known_hosts and identity files the
run used; --ssh-known-hosts and --ssh-identity override them). A host that
cannot be reached is reported with what is left there, and the run directory
is kept: run teardown again once the host is back. A host done once is not
connected to again.

--target limits teardown to the resources of those targets (as run and
provision name them, KIND@ssh://USER@HOST[:PORT] for one on a remote host);
the run directory and the other targets' resources stay, for a later
teardown of the whole run.

A run in progress is never torn down by another command: the process that
made it (run, provision while it works) holds its lock (run.lock in the run
directory) until it exits, however it exits. --all leaves such a run as it is
and says so; --run fails, naming the process. --force tears it down anyway,
under the feet of the process still using it.`,
		Example: `  sealbench teardown --run 20261129T085500-3f9a1c
  sealbench teardown --all --json
  sealbench teardown --run 20261129T085500-3f9a1c --target ` + remoteExample() + `
  sealbench teardown --all && sealbench audit`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			specs, err := sc.specs()
			if err != nil {
				return err
			}
			targets := orchestrate.Names(specs)
			if err := sc.check(); err != nil {
				return err
			}
			p := newProgress(g.stderr, "teardown")
			defer p.Close()
			results, err := orchestrate.Teardown(c.Context(), orchestrate.TeardownOptions{Run: runID, All: all, Targets: targets, SSH: sc.ssh.options(), Log: p.Logf, Force: force})
			if results == nil {
				return err
			}
			p.Close()
			if g.json && err == nil {
				return writeJSON(g.stdout, map[string]any{"runs": results})
			}
			if !g.json {
				for _, r := range results {
					for _, u := range r.Unreachable {
						fmt.Fprintf(g.stdout, "run %s: host %s cannot be reached (%s); left there:\n", r.Run, cliutil.Printable(u.Host), cliutil.Printable(u.Reason))
						for _, l := range u.Left {
							fmt.Fprintf(g.stdout, "  %s\n", cliutil.Printable(fmt.Sprint(l)))
						}
					}
					switch {
					case r.InProgress != "":
						fmt.Fprintf(g.stdout, "run %s: in progress, left as it is (--force tears it down anyway)\n", r.Run)
					case len(r.Kept) > 0:
						fmt.Fprintf(g.stdout, "run %s: %d removed; kept %s, because of the failures below\n", r.Run, len(r.Removed), cliutil.Printable(fmt.Sprint(r.Kept[0])))
					case len(r.Removed) == 0 && len(targets) > 0:
						fmt.Fprintf(g.stdout, "run %s: nothing of %s left to remove\n", r.Run, strings.Join(targets, ", "))
					case len(r.Removed) == 0:
						fmt.Fprintf(g.stdout, "run %s: nothing left to remove\n", r.Run)
					case len(targets) > 0:
						fmt.Fprintf(g.stdout, "run %s: removed %d resources of %s; the run directory stays\n", r.Run, len(r.Removed), strings.Join(targets, ", "))
					default:
						fmt.Fprintf(g.stdout, "run %s: removed %d resources\n", r.Run, len(r.Removed))
					}
				}
				if all && len(results) == 0 {
					fmt.Fprintf(g.stdout, "no runs in %s\n", runs.RunsDir(runs.DefaultStateDir()))
				}
			}
			if err != nil {
				return &detailError{&userError{Code: ExitFailed, Err: err,
					Hint: "fix the causes above and run teardown again (it resumes); `sealbench audit` lists what is left"}, "runs", results}
			}
			return nil
		},
	}
	c.Flags().StringVar(&runID, "run", "", "the run to tear down (its id, as provision printed it)")
	c.Flags().BoolVar(&all, "all", false, "tear down every run in the state directory (but runs in progress)")
	c.Flags().BoolVar(&force, "force", false, "tear down runs in progress too (another process holds their lock)")
	sc.flags(c.Flags(), provision.CommandTeardown, "tear down only these targets' resources, comma-separated (the run directory stays)")
	return c
}
