// Package cmd is the sealbench command line: one file per command, each
// parsing its flags and calling one library function.
package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/internal/version"
)

// Exit codes, stable and documented in the root command's help and README.md.
const (
	ExitOK          = cliutil.ExitOK
	ExitMismatch    = 1 // verification failed: contents differ from the signed manifest; audit: leftovers
	ExitSignature   = 2 // signature missing or untrusted
	ExitUnusable    = cliutil.ExitUnusable
	ExitFailed      = cliutil.ExitFailed
	ExitInterrupted = cliutil.ExitInterrupted
)

const exitCodesHelp = `Exit codes:
  0    success
  1    verification failed: the bundle's contents differ from its signed manifest;
       audit: something a run created is still there; run: a sample failed;
       report --bounds: a median outside its bounds
  2    signature missing or untrusted (no key, wrong key, bad signature)
  3    unusable input, refused before anything is done: bad flags or arguments
       (out of range, an output that is an input), not a (whole) bundle, a bad
       key or password
  4    the operation failed for another reason (a build, I/O, the environment)
  130  interrupted`

// global holds the flags every command takes.
type global struct {
	json   bool
	stdout io.Writer
	stderr io.Writer
	// outputs are what the command made, given to the sudo user at its
	// end when it ran as root under sudo.
	outputs cliutil.Outputs
}

// userError is an error meant for the user, with its exit code and a hint.
type userError = cliutil.UserError

func usageErrorf(hint, format string, args ...any) error {
	return cliutil.Usagef(hint, format, args...)
}

func writeJSON(w io.Writer, v any) error { return cliutil.WriteJSON(w, v) }

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &global{stdout: stdout, stderr: stderr}
	code := cliutil.Run(ctx, newRoot(g), args, stdout, stderr, &g.json, classifyHost)
	if err := g.outputs.GiveToSudoUser(); err != nil {
		fmt.Fprintf(stderr, "sealbench: %v\n", err)
	}
	return code
}

func newRoot(g *global) *cobra.Command {
	root := &cobra.Command{
		Use:   "sealbench",
		Short: "Reproducible, signed filesystem benchmarks of sandbox backends",
		Long: `sealbench seals LayerFS, the Engine API stand-in, the runner and the twelve cell
bodies into one signed, hash-manifested, reproducible bundle, verifies it,
provisions targets from it, runs the twelve cells on them under a strict cache
protocol, reports exact counts first and timings second, and tears everything
down, with an audit that proves nothing is left.` + buildNote,
		Example: mainExample() + `

  # Make a signing key pair (the password comes from SEALBENCH_PASSWORD; empty is allowed)
  SEALBENCH_PASSWORD= sealbench keygen --out ~/.config/sealbench

  # Seal the source tree you are in, then verify the bundle and its tar
  SEALBENCH_PASSWORD= sealbench seal --out out
  sealbench verify --bundle out/build-linux-0123456789ab
  sealbench verify --bundle out/build-linux-0123456789ab.tar --json`,
		Version: version.Version,
	}
	root.SetVersionTemplate("sealbench {{.Version}}" + versionNote + "\n")
	cliutil.Prepare(root, &g.json, exitCodesHelp)
	for _, c := range hostCommands(g) {
		root.AddCommand(c)
	}
	root.AddCommand(newSampleCmd(g), newVersionCmd(g))
	completeValues(root)
	return root
}

// defaultKeyDir is where keygen writes and seal and verify look by default.
func defaultKeyDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "sealbench")
	}
	return "."
}

func newVersionCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if g.json {
				return writeJSON(g.stdout, map[string]any{"version": version.Version, "bundled": bundledBuild})
			}
			fmt.Fprintf(g.stdout, "sealbench %s%s\n", version.Version, versionNote)
			return nil
		},
	}
}
