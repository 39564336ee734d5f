//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		text string
	}{
		{[]string{"--version"}, ExitOK, "standin "},
		{[]string{"version", "--json"}, ExitOK, `"apiVersion"`},
		{[]string{"serve"}, ExitUnusable, "required flag"},
		{[]string{"serve", "--socket", "x"}, ExitUnusable, "required flag"},
		{[]string{"frobnicate"}, ExitUnusable, "unknown command"},
		{[]string{"serve", "--nope"}, ExitUnusable, "unknown flag"},
		{[]string{"--help"}, ExitOK, "Exit codes:"},
	} {
		code, out, errOut := run(tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.text) {
			t.Errorf("standin %v: exit %d, want %d; output %q does not contain %q", tc.args, code, tc.code, out+errOut, tc.text)
		}
	}
}

func TestServeRefusesUnsafeSocketDirectory(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	code, out, errOut := run("serve", "--json", "--socket", filepath.Join(dir, "s.sock"), "--state", filepath.Join(t.TempDir(), "state"))
	if code != ExitUnusable || !strings.Contains(errOut, "hint:") {
		t.Errorf("exit %d, stderr %q; want %d with a hint", code, errOut, ExitUnusable)
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil || j["exitCode"] != float64(ExitUnusable) {
		t.Errorf("--json error output %q: %v", out, err)
	}
}

func TestInventory(t *testing.T) {
	state := t.TempDir()
	for _, d := range []string{"images", "layers", "tmp", "containers"} {
		os.Mkdir(filepath.Join(state, d), 0o700)
	}
	code, out, _ := run("inventory", "--json", "--state", state)
	if code != ExitOK || !strings.Contains(out, `"leftovers": null`) {
		t.Errorf("clean state: exit %d\n%s", code, out)
	}
	os.Mkdir(filepath.Join(state, "containers", "0123abcd"), 0o700)
	code, out, _ = run("inventory", "--state", state)
	if code != ExitLeftovers || !strings.Contains(out, "LEFT BEHIND: container directory 0123abcd") {
		t.Errorf("a leftover container: exit %d\n%s", code, out)
	}
}
