package cliutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var errMine = errors.New("mine")

type detailed struct{ error }

func (detailed) JSONDetail() (string, any) { return "problems", []string{"a"} }
func (d detailed) Unwrap() error           { return d.error }

func run(t *testing.T, fail error, args ...string) (int, string, string) {
	t.Helper()
	var jsonOut bool
	root := &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error { return fail }}
	Prepare(root, &jsonOut, "Exit codes:\n  0 ok")
	var o, e bytes.Buffer
	code := Run(context.Background(), root, args, &o, &e, &jsonOut, func(err error) (int, string, bool) {
		if errors.Is(err, errMine) {
			return 2, "classified", true
		}
		return 0, "", false
	})
	return code, o.String(), e.String()
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		fail     error
		args     []string
		code     int
		inStderr string
	}{
		{"success", nil, nil, ExitOK, ""},
		{"user error", &UserError{Code: 1, Err: errors.New("bad"), Hint: "do this"}, nil, 1, "hint: do this"},
		{"usage", Usagef("see help", "wrong %s", "thing"), nil, ExitUnusable, "tool: wrong thing"},
		{"classified", errMine, nil, 2, "hint: classified"},
		{"unknown flag", nil, []string{"--nope"}, ExitUnusable, "unknown flag"},
		{"anything else", errors.New("disk on fire"), nil, ExitFailed, "tool: disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.fail, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.inStderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.inStderr)
			}
		})
	}
}

func TestRunJSONError(t *testing.T) {
	code, stdout, _ := run(t, detailed{&UserError{Code: 1, Err: errors.New("differs"), Hint: "h"}}, "--json")
	var out struct {
		Error    string
		ExitCode int
		Hint     string
		Problems []string
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 1 || out.ExitCode != 1 || out.Error != "differs" || len(out.Problems) != 1 {
		t.Errorf("--json error output %q (exit %d): %v", stdout, code, err)
	}
}

func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		{"plain, héllo, 日本", "plain, héllo, 日本", "plain, héllo, 日本"},
		{"a\x1b[31mred\x1b[0m", `a\x1b[31mred\x1b[0m`, `a\x1b[31mred\x1b[0m`},
		{"title\x1b]0;pwned\x07", `title\x1b]0;pwned\a`, `title\x1b]0;pwned\a`},
		{"over\rwrite", `over\rwrite`, `over\rwrite`},
		{"two\nlines\tand a tab", `two\nlines\tand a tab`, "two\nlines\tand a tab"},
		{"c1 \u009b and bidi \u202e", `c1 \u009b and bidi \u202e`, `c1 \u009b and bidi \u202e`},
		{"bad \xff utf-8", `bad \xff utf-8`, `bad \xff utf-8`},
		{"del \x7f", `del \x7f`, `del \x7f`},
	} {
		if got := Printable(c.in); got != c.line {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := PrintableText(c.in); got != c.text {
			t.Errorf("PrintableText(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}

// TestRunEscapesErrors: an error quoting text from outside (an Engine's
// message, a label) reaches the terminal with its escape sequences shown,
// not obeyed.
func TestRunEscapesErrors(t *testing.T) {
	var jsonOut bool
	root := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error {
		return &UserError{Code: ExitFailed, Err: errors.New("container \x1b[2Jgone"), Hint: "label \x1b]0;t\x07"}
	}}
	Prepare(root, &jsonOut, "")
	var stdout, stderr bytes.Buffer
	Run(context.Background(), root, nil, &stdout, &stderr, &jsonOut, nil)
	if strings.Contains(stderr.String(), "\x1b") || !strings.Contains(stderr.String(), `container \x1b[2Jgone`) || !strings.Contains(stderr.String(), `label \x1b]0;t\a`) {
		t.Errorf("stderr %q, want the escape sequences shown escaped", stderr.String())
	}
}
