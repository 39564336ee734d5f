package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
)

// TestStartRunnerRelaysAndClassifies runs small programs in the runner's
// place (sh scripts speaking its stderr protocol and exit codes) and
// checks what the host makes of each: progress lines reach the log and
// the status line, other lines are logged as the runner's, failed samples
// are not an error, and every other exit says why, with the runner's last
// words.
func TestStartRunnerRelaysAndClassifies(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         string // "" for no error
		code         int    // the error's exit code, when it has one
	}{
		{"ok", `echo '{"log":"local C01 1/1 round 0: ok"}' >&2; echo '{"status":"local C01 1/1: timed run"}' >&2; ` +
			`echo '{"log":"local C02 2/2 round 0: ok","sample":{"target":"local","cell":"C02","round":0,"status":"ok"}}' >&2; exit 0`, "", 0},
		{"a sample failed", `echo 'sealbench: 1 of 1 samples failed' >&2; exit 1`, "", 0},
		{"an old bundle's runner", `echo 'sealbench: unknown command "sample" for "sealbench"' >&2; exit 3`, "sealed before its runner did", cliutil.ExitUnusable},
		{"could not go on", `echo 'sealbench: engine unix:///x.sock: no such file' >&2; exit 4`, "exited 4: sealbench: engine unix:///x.sock: no such file", 0},
		{"interrupted", `exit 130`, "interrupted", 0},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			exe := filepath.Join(t.TempDir(), "runner")
			if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			var logs, statuses, done []string
			err := startRunner(context.Background(), exe, "/nonexistent/plan.json",
				func(f string, a ...any) {
					logs = append(logs, strings.TrimSpace(strings.ReplaceAll(f, "%s", a[0].(string))))
				},
				func(s string) { statuses = append(statuses, s) },
				func(d manifests.SampleDone, line string) {
					done = append(done, fmt.Sprintf("%s %s %d %s: %s", d.Target, d.Cell, d.Round, d.Status, line))
				})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("startRunner: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("startRunner: %v, want an error saying %q", err, tc.want)
			}
			var ue *cliutil.UserError
			if tc.code != 0 && (!errors.As(err, &ue) || ue.Code != tc.code) {
				t.Errorf("error %v: want exit code %d", err, tc.code)
			}
			if tc.name == "ok" && (len(logs) != 1 || logs[0] != "local C01 1/1 round 0: ok" || len(statuses) != 1) {
				t.Errorf("relayed logs %q, statuses %q", logs, statuses)
			}
			// A finished sample is heard as one, not logged.
			if want := []string{"local C02 0 ok: local C02 2/2 round 0: ok"}; tc.name == "ok" && !slices.Equal(done, want) {
				t.Errorf("finished samples heard %q, want %q", done, want)
			}
			if tc.name == "a sample failed" && (len(logs) != 1 || !strings.HasPrefix(logs[0], "runner: ")) {
				t.Errorf("a line outside the protocol should be logged as the runner's: %q", logs)
			}
		})
	}
}
