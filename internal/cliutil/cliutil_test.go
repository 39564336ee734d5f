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
