package toolexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	errMissing  = errors.New("missing")
	errOld      = errors.New("too old")
	errUntested = errors.New("untested")
	spec        = Spec{Default: "tool", Min: MustVersion("0.6.0"), MinWhy: "for --x", Max: MustVersion("1.2.2"), Checked: "its sources at 0.6.0 and 1.2.2",
		Install: "install it so", Upgrade: "upgrade so", ErrMissing: errMissing, ErrTooOld: errOld, ErrUntested: errUntested}
)

// script writes an executable shell script named tool in a fresh
// directory, put alone on PATH.
func script(t *testing.T, body string) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "tool")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	return p
}

func TestSpecCheck(t *testing.T) {
	ctx := context.Background()
	t.Setenv("PATH", t.TempDir())
	if _, _, err := spec.Check(ctx, ""); !errors.Is(err, errMissing) || !strings.Contains(err.Error(), "install it so") {
		t.Errorf("Check without the tool: %v", err)
	}
	script(t, `echo "tool version 0.5.9 (build x)"`)
	if _, _, err := spec.Check(ctx, ""); !errors.Is(err, errOld) ||
		!strings.Contains(err.Error(), "0.5.9, sealbench needs 0.6.0 or newer (for --x) (it drives 0.6.0 to 1.2.2, checked against its sources at 0.6.0 and 1.2.2); upgrade so") {
		t.Errorf("Check of 0.5.9: %v", err)
	}
	for _, in := range []string{"0.6.0", "0.10.0", "1.2.2"} {
		p := script(t, `echo "tool `+in+`"`)
		tl, v, err := spec.Check(ctx, "")
		if err != nil || tl.Path != p || v != MustVersion(in) {
			t.Errorf("Check of %s = %+v, %v, %v; want %s", in, tl, v, err, p)
		}
	}
	script(t, `echo "oops" >&2; exit 3`)
	if _, _, err := spec.Check(ctx, ""); !errors.Is(err, errMissing) || !strings.Contains(err.Error(), "oops") {
		t.Errorf("Check of a tool that fails: %v", err)
	}
}

// TestSpecNewerThanChecked: a release newer than Max is refused, naming
// the range and the flag; allowed, it is a warning naming the range.
func TestSpecNewerThanChecked(t *testing.T) {
	ctx := context.Background()
	p := script(t, `echo "tool version 1.3.0 (build: release)"`)
	tl := &Tool{Path: p}
	const rng = "0.6.0 to 1.2.2, checked against its sources at 0.6.0 and 1.2.2"
	_, warn, err := spec.CheckVersion(ctx, tl, false)
	if !errors.Is(err, errUntested) || warn != "" || !strings.Contains(err.Error(), "is 1.3.0, newer than the releases sealbench drives ("+rng+"); pass --allow-untested-tool") {
		t.Errorf("CheckVersion of 1.3.0: %q, %v", warn, err)
	}
	v, warn, err := spec.CheckVersion(ctx, tl, true)
	if err != nil || v != MustVersion("1.3.0") || !strings.Contains(warn, "is 1.3.0, newer than the releases sealbench drives ("+rng+"): going on because of --allow-untested-tool") {
		t.Errorf("CheckVersion of 1.3.0, allowed: %v, %q, %v", v, warn, err)
	}
	open := spec
	open.Max = Version{}
	if _, warn, err := open.CheckVersion(ctx, tl, false); err != nil || warn != "" || open.Range() != "0.6.0 or newer" {
		t.Errorf("without a Max: %q, %v, range %q", warn, err, open.Range())
	}
}

func TestRunErrorsAndJSON(t *testing.T) {
	ctx := context.Background()
	p := script(t, `case "$1" in json) echo '[{"name":"a"}]';; bad) echo 'nope';; *) echo "no such $1" >&2; exit 2;; esac`)
	tl := &Tool{Path: p, LogDir: filepath.Join(t.TempDir(), "logs")}
	var v []struct{ Name string }
	if err := tl.JSON(ctx, &v, "json"); err != nil || len(v) != 1 || v[0].Name != "a" {
		t.Errorf("JSON = %+v, %v", v, err)
	}
	if err := tl.JSON(ctx, &v, "bad"); err == nil || !strings.Contains(err.Error(), "`"+p+" bad`") {
		t.Errorf("JSON of bad output: %v", err)
	}
	_, err := tl.Run(ctx, "frob", "it's")
	var e *Error
	if !errors.As(err, &e) || e.ExitCode != 2 || e.Stderr != "no such frob" || !strings.Contains(err.Error(), "`"+p+" frob 'it'\\''s'`") {
		t.Errorf("Run of a failing command: %v (%+v)", err, e)
	}
	if logs, _ := filepath.Glob(filepath.Join(tl.LogDir, "*-frob-*.err")); len(logs) != 1 {
		t.Errorf("the failing command's stderr was not kept: %v", logs)
	}
}
