// Package cliutil holds what every sealbench command line shares: the exit
// codes common to all of them, errors meant for the user (with their exit
// code and a hint), JSON output, and the run loop that turns a cobra
// command's error into an exit code, on stderr and, with --json, on stdout.
package cliutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// Exit codes shared by every binary. Each binary documents its own further
// codes (1 and 2) in its help.
const (
	ExitOK          = 0
	ExitUnusable    = 3   // unusable input: bad flags or arguments, and the like
	ExitFailed      = 4   // the operation failed for another reason
	ExitInterrupted = 130 // interrupted (Ctrl-C or SIGTERM)
)

// UserError is an error meant for the user: it carries its exit code and,
// where there is one, a hint at what to do next.
type UserError struct {
	Code int
	Err  error
	Hint string
}

func (e *UserError) Error() string { return e.Err.Error() }
func (e *UserError) Unwrap() error { return e.Err }

// Usagef returns a UserError with ExitUnusable.
func Usagef(hint, format string, args ...any) error {
	return &UserError{Code: ExitUnusable, Err: fmt.Errorf(format, args...), Hint: hint}
}

// JSONDetailer is an error that adds one field to the --json error output
// (a list of problems, say).
type JSONDetailer interface {
	JSONDetail() (key string, value any)
}

// Hinter is an error that knows the next step to suggest; it exits with
// ExitFailed unless a UserError or the binary's classifier says otherwise.
type Hinter interface {
	Hint() string
}

// WriteJSON writes v as indented JSON, without HTML escaping.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Classifier maps a binary's own errors to an exit code and a hint; ok is
// false for errors it does not know.
type Classifier func(err error) (code int, hint string, ok bool)

// Prepare sets what every root command shares: silent errors and usage (Run
// prints them), no completion command, the --json flag into jsonOut, flag
// errors as usage errors, and the exit codes under the usage text.
func Prepare(root *cobra.Command, jsonOut *bool, exitCodesHelp string) {
	root.SilenceUsage, root.SilenceErrors = true, true
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().BoolVar(jsonOut, "json", false, "print machine-readable JSON on stdout instead of text")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return Usagef("see `"+c.CommandPath()+" --help`", "%v", err)
	})
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodesHelp + "\n")
}

// Run executes root with args and returns the exit code. An error is
// printed to stderr as "name: error" and "hint: ...", and, when *jsonOut is
// set, also to stdout as {"error", "exitCode", "hint", ...}.
func Run(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer, jsonOut *bool, classify Classifier) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code, hint := exitCode(ctx, root.Name(), err, classify)
	if *jsonOut {
		out := map[string]any{"error": err.Error(), "exitCode": code}
		if hint != "" {
			out["hint"] = hint
		}
		var d JSONDetailer
		if errors.As(err, &d) {
			k, v := d.JSONDetail()
			out[k] = v
		}
		WriteJSON(stdout, out)
	}
	// An error may quote what came from outside (a name, a tool's or an
	// Engine's message): its control characters are shown escaped.
	fmt.Fprintf(stderr, "%s: %s\n", root.Name(), PrintableText(err.Error()))
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", PrintableText(hint))
	}
	return code
}

func exitCode(ctx context.Context, name string, err error, classify Classifier) (int, string) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return ExitInterrupted, ""
	}
	var ue *UserError
	if errors.As(err, &ue) {
		return ue.Code, ue.Hint
	}
	if classify != nil {
		if code, hint, ok := classify(err); ok {
			return code, hint
		}
	}
	var h Hinter
	if errors.As(err, &h) {
		return ExitFailed, h.Hint()
	}
	// cobra's own argument errors.
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") || strings.Contains(msg, "arg(s)") ||
		strings.HasPrefix(msg, "unknown flag") || strings.Contains(msg, "required flag") {
		return ExitUnusable, "see `" + name + " --help`"
	}
	return ExitFailed, ""
}

// Printable returns s fit to print on one line of a terminal: every
// character that is not printable (control characters such as ESC, CR and
// newline, C1 controls, bidirectional overrides) is escaped as in a Go
// quoted string (\x1b, \r, \n, \u202e), as is every byte that is not
// UTF-8 (\xff). Text from outside sealbench (names, labels, versions,
// messages from an Engine or a tool) goes through it before it is shown,
// so that it can neither move the cursor, recolour or retitle a terminal,
// nor fake a line of output.
func Printable(s string) string { return escape(s, false) }

// PrintableText is Printable for text of several lines: newlines and tabs
// are kept, every other control character escaped.
func PrintableText(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	clean := true
	for _, r := range s {
		if !keep(r, lines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keep(r, lines):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r) // '\x1b'
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

func keep(r rune, lines bool) bool {
	if lines && (r == '\n' || r == '\t') {
		return true
	}
	return r != utf8.RuneError && strconv.IsPrint(r)
}
