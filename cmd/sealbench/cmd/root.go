// Package cmd is the sealbench command line: one file per command, each
// parsing its flags and calling one library function.
package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/version"
)

// Exit codes, stable and documented in the root command's help and README.md.
const (
	ExitOK          = 0   // success
	ExitMismatch    = 1   // verification failed: contents differ from the signed manifest
	ExitSignature   = 2   // signature missing or untrusted
	ExitUnusable    = 3   // unusable input: bad flags or arguments, not a bundle, a bad key or password
	ExitFailed      = 4   // the operation failed for another reason: a build, I/O, the environment
	ExitInterrupted = 130 // interrupted (Ctrl-C or SIGTERM)
)

const exitCodesHelp = `Exit codes:
  0    success
  1    verification failed: the bundle's contents differ from its signed manifest
  2    signature missing or untrusted (no key, wrong key, bad signature)
  3    unusable input: bad flags or arguments, not a bundle, a bad key or password
  4    the operation failed for another reason (a build, I/O, the environment)
  130  interrupted`

// global holds the flags every command takes.
type global struct {
	json   bool
	stdout io.Writer
	stderr io.Writer
}

// userError is an error meant for the user: it carries its exit code and,
// where there is one, a hint at what to do next.
type userError struct {
	code int
	err  error
	hint string
}

func (e *userError) Error() string { return e.err.Error() }
func (e *userError) Unwrap() error { return e.err }

func usageErrorf(hint, format string, args ...any) error {
	return &userError{code: ExitUnusable, err: fmt.Errorf(format, args...), hint: hint}
}

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &global{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code, hint := classify(ctx, err)
	if g.json {
		out := map[string]any{"error": err.Error(), "exitCode": code}
		if hint != "" {
			out["hint"] = hint
		}
		var d interface{ jsonDetail() (string, any) }
		if errors.As(err, &d) {
			k, v := d.jsonDetail()
			out[k] = v
		}
		writeJSON(stdout, out)
	}
	fmt.Fprintf(stderr, "sealbench: %v\n", err)
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return code
}

func newRoot(g *global) *cobra.Command {
	root := &cobra.Command{
		Use:   "sealbench",
		Short: "Reproducible, signed filesystem benchmarks of sandbox backends",
		Long: `sealbench seals LayerFS, the Engine API stand-in, the runner and the twelve cell
bodies into one signed, hash-manifested, reproducible bundle, verifies it, and
(as further commands land) provisions targets from it, runs the twelve cells,
reports, and tears everything down.` + buildNote,
		Example: `  # Make a signing key pair (the password comes from SEALBENCH_PASSWORD; empty is allowed)
  SEALBENCH_PASSWORD= sealbench keygen --out ~/.config/sealbench

  # Seal the source tree you are in, then verify the bundle and its tar
  SEALBENCH_PASSWORD= sealbench seal --out out
  sealbench verify --bundle out/build-linux-0123456789ab
  sealbench verify --bundle out/build-linux-0123456789ab.tar --json`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("sealbench {{.Version}}" + versionNote + "\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON on stdout instead of text")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("see `"+c.CommandPath()+" --help`", "%v", err)
	})
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodesHelp + "\n")
	for _, c := range hostCommands(g) {
		root.AddCommand(c)
	}
	root.AddCommand(newVersionCmd(g))
	return root
}

// classify maps an error to its exit code and hint.
func classify(ctx context.Context, err error) (int, string) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return ExitInterrupted, ""
	}
	var ue *userError
	if errors.As(err, &ue) {
		return ue.code, ue.hint
	}
	if code, hint, ok := classifyHost(err); ok {
		return code, hint
	}
	// cobra's own argument errors ("unknown command", "accepts 0 arg(s)").
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command") || strings.Contains(msg, "arg(s)") || strings.HasPrefix(msg, "unknown flag") {
		return ExitUnusable, "see `sealbench --help`"
	}
	return ExitFailed, ""
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
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
