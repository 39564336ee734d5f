//go:build linux

// Package cli is the command line of layerfsd: it parses flags and calls the
// layerfs library. cmd/layerfsd is a thin main around Main; nothing here
// exits the process. What --json prints, and the exit codes, are
// daemonapi's types, which the runner shares.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sealbench/sealbench/internal/sockpath"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/layerfs"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
	"github.com/spf13/cobra"
)

// exitCodesHelp documents the exit codes in --help. They are daemonapi's
// Exit* constants, which the runner reads too.
const exitCodesHelp = `Exit codes:
  0  success (including a Commit that answers UpToDate)
  1  failure not listed below
  2  bad flags or arguments (init: a --store that is not new or empty;
     import: a --from that is not a directory; a socket path over 107
     bytes, or where something other than a socket is; a control socket
     or overlay inside the Workspace; a negative duration)
  3  Store missing, damaged (check: a damaged database page or tree, a
     damaged or missing blob), not a LayerFS Store, or written by a newer
     layerfsd
  4  Store already mounted (another daemon holds its lock)
  5  mount point is not an empty directory
  6  control socket did not answer in time, or nobody listens on it
  7  Layer not found, or the id prefix is ambiguous
  8  the daemon exited before the Workspace was ready
`

// usageError marks errors in how the command was called.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// ExitCode maps an error to the documented exit code.
func ExitCode(err error) int {
	var ue usageError
	var ce *codedError
	switch {
	case err == nil:
		return daemonapi.ExitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ue), errors.Is(err, layerfs.ErrBadStoreDir), errors.Is(err, layerfs.ErrBadSource),
		errors.Is(err, sockpath.ErrTooLong), errors.Is(err, layerfs.ErrBadControl):
		return daemonapi.ExitUsage
	case errors.Is(err, layerfs.ErrNotStore), errors.Is(err, layerfs.ErrNewerSchema), errors.Is(err, layerfs.ErrDamaged):
		return daemonapi.ExitStore
	case errors.Is(err, layerfs.ErrStoreBusy):
		return daemonapi.ExitBusy
	case errors.Is(err, layerfs.ErrBadMountpoint):
		return daemonapi.ExitMountpt
	case errors.Is(err, layerfs.ErrNoAnswer):
		return daemonapi.ExitNoAnswer
	case errors.Is(err, layerfs.ErrNotFound), errors.Is(err, layerfs.ErrAmbiguous):
		return daemonapi.ExitLayer
	}
	return daemonapi.ExitFailure
}

// codedError carries an exit code decided elsewhere (by the daemon).
type codedError struct {
	code int
	msg  string
}

func (e *codedError) Error() string { return e.msg }

type globals struct {
	json   bool
	stdout io.Writer
}

func (g *globals) print(v any, human func(w io.Writer)) error {
	if g.json {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	human(g.stdout)
	return nil
}

// Main runs layerfsd with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil {
		code := ExitCode(err)
		if g.json {
			json.NewEncoder(stdout).Encode(daemonapi.Error{Message: err.Error(), ExitCode: code})
		}
		fmt.Fprintf(stderr, "layerfsd: %v\n", err)
		return code
	}
	return daemonapi.ExitOK
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "layerfsd",
		Short:         "LayerFS: a layered workspace filesystem kept in a Store",
		Long:          "LayerFS keeps immutable filesystem Layers in a Store (SQLite plus content-addressed blobs)\nand mounts them as FUSE Workspaces with a private writable overlay.",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodesHelp)
	root.AddCommand(cmdInit(g), cmdImport(g), cmdMount(g), cmdServe(g), cmdCommit(g), cmdStats(g),
		cmdUnmount(g), cmdLog(g), cmdShow(g), cmdDiff(g), cmdCheck(g), cmdGC(g))
	return root
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d", c.Name(), n, len(args))}
		}
		return nil
	}
}

func requireFlags(c *cobra.Command, names ...string) error {
	for _, n := range names {
		if v, _ := c.Flags().GetString(n); v == "" {
			return usageError{fmt.Errorf("%s needs --%s", c.Name(), n)}
		}
	}
	return nil
}
