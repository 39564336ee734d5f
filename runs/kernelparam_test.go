package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/kparam"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
)

func leftoversOf(t *testing.T, state, run string, kind manifests.ResourceKind) []Resource {
	t.Helper()
	res, err := Audit(context.Background(), AuditOptions{StateDir: state, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	var out []Resource
	for _, r := range res.Leftovers {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// TestKernelParamRecordedFirstAndPutBack: the change is durable in the
// ledger, with what the parameter was, before the parameter changes; the
// audit lists it while it is in effect (a run that crashed, or is still
// up); teardown puts the old value back, and the audit is then clean.
func TestKernelParamRecordedFirstAndPutBack(t *testing.T) {
	read := testenv.FakeKernelParam(t, FUSEURingParam, "N")
	state, run := newTestRun(t)
	var atRecord string
	run.Ledger.AfterRecord = func(e manifests.LedgerEntry) {
		if e.Kind == manifests.ResourceKernelParam {
			entries, _, err := ledger.Read(run.Dir)
			if err != nil || entries[len(entries)-1].Key != FUSEURingParam {
				t.Errorf("the entry is not durable when the parameter changes: %v %+v", err, entries)
			}
			atRecord = read()
		}
	}
	was, err := run.SetKernelParam(FUSEURingParam, "Y", "test")
	if err != nil || was != "N" {
		t.Fatalf("SetKernelParam: was %q, %v", was, err)
	}
	if atRecord != "N" || read() != "Y" {
		t.Fatalf("the parameter read %q when recorded and %q after, want N then Y", atRecord, read())
	}
	entries, _, err := ledger.Read(run.Dir)
	if err != nil {
		t.Fatal(err)
	}
	e := entries[len(entries)-1]
	if e.Kind != manifests.ResourceKernelParam || e.Key != FUSEURingParam || e.Value != "Y" || e.Previous != "N" || e.Target != "" {
		t.Fatalf("ledger entry: %+v", e)
	}

	// As a crash leaves it: the process is gone, the change stays.
	run.Close()
	left := leftoversOf(t, state, run.ID, manifests.ResourceKernelParam)
	if len(left) != 1 || left[0].Key != FUSEURingParam || !strings.Contains(left[0].Detail, "puts N back") {
		t.Fatalf("the audit does not list the change in effect: %v", left)
	}
	res, err := Teardown(context.Background(), run.Dir, TeardownOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if read() != "N" || len(res.Warnings) != 0 {
		t.Errorf("after teardown the parameter reads %q (want N), warnings %v", read(), res.Warnings)
	}
	if res, err := Audit(context.Background(), AuditOptions{StateDir: state}); err != nil || len(res.Leftovers) != 0 {
		t.Errorf("audit after teardown: %v %v", res.Leftovers, err)
	}
}

// TestKernelParamAlreadySet: a parameter that reads the value already is
// recorded all the same (the pins rely on it), written not at all, not a
// leftover, and left as it is by teardown.
func TestKernelParamAlreadySet(t *testing.T) {
	read := testenv.FakeKernelParam(t, FUSEURingParam, "Y")
	state, run := newTestRun(t)
	if was, err := run.SetKernelParam(FUSEURingParam, "Y", "test"); err != nil || was != "Y" {
		t.Fatalf("SetKernelParam: was %q, %v", was, err)
	}
	if es := run.Ledger.Entries(); es[len(es)-1].Kind != manifests.ResourceKernelParam || es[len(es)-1].Previous != "Y" {
		t.Fatalf("not recorded: %+v", es)
	}
	run.Close()
	if left := leftoversOf(t, state, run.ID, manifests.ResourceKernelParam); len(left) != 0 {
		t.Errorf("a change that changed nothing is a leftover: %v", left)
	}
	if _, err := Teardown(context.Background(), run.Dir, TeardownOptions{}); err != nil || read() != "Y" {
		t.Errorf("teardown: %v; the parameter reads %q, want Y", err, read())
	}
}

// TestKernelParamChangedSinceIsLeft: teardown puts the old value back only
// while the parameter reads what the run set; when someone has changed it
// since, it is left as it is, with a warning that says so, and the
// teardown is otherwise complete.
func TestKernelParamChangedSinceIsLeft(t *testing.T) {
	const param = "/sys/module/fake/parameters/level"
	read := testenv.FakeKernelParam(t, param, "0")
	state, run := newTestRun(t)
	if _, err := run.SetKernelParam(param, "2", "test"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kparam.SysRoot, param), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	run.Close()
	if left := leftoversOf(t, state, run.ID, manifests.ResourceKernelParam); len(left) != 0 {
		t.Errorf("a change no longer in effect is a leftover: %v", left)
	}
	res, err := Teardown(context.Background(), run.Dir, TeardownOptions{})
	if err != nil {
		t.Fatalf("teardown failed: %v", err)
	}
	if read() != "1" {
		t.Errorf("teardown overwrote someone else's value: reads %q", read())
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "reads 1, not the 2 it was set to (it was 0 before)") || !strings.Contains(res.Warnings[0], "left as it is") {
		t.Errorf("warnings: %q", res.Warnings)
	}
	if _, err := os.Stat(run.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run directory was kept: %v", err)
	}
}

// TestKernelParamMissing: on a kernel without the parameter, nothing is
// recorded and SetKernelParam says what it could not read.
func TestKernelParamMissing(t *testing.T) {
	testenv.FakeKernelParam(t, "/sys/module/other/parameters/x", "0")
	_, run := newTestRun(t)
	if _, err := run.SetKernelParam(FUSEURingParam, "Y", "test"); err == nil || !strings.Contains(err.Error(), FUSEURingParam) {
		t.Fatalf("SetKernelParam on a kernel without it: %v", err)
	}
	if es := run.Ledger.Entries(); len(es) != 1 {
		t.Errorf("recorded %+v", es)
	}
}

// TestKernelParamTwoRuns: two runs on one machine rely on the parameter
// at once. The first to be torn down lets go and leaves it on for the
// other, without a warning; the second puts back what it was before
// either. Each ledger says what it was before the first.
func TestKernelParamTwoRuns(t *testing.T) {
	read := testenv.FakeKernelParam(t, FUSEURingParam, "N")
	_, a := newTestRun(t)
	_, b := newTestRun(t)
	for _, r := range []*Run{a, b} {
		if was, err := r.SetKernelParam(FUSEURingParam, "Y", "test"); err != nil || was != "N" {
			t.Fatalf("run %s: was %q, %v; want N", r.ID, was, err)
		}
		r.Close()
	}
	var log strings.Builder
	res, err := Teardown(context.Background(), a.Dir, TeardownOptions{Log: func(f string, args ...any) { fmt.Fprintf(&log, f+"\n", args...) }})
	if err != nil || len(res.Warnings) != 0 {
		t.Fatalf("tearing down the first: %v, warnings %q", err, res.Warnings)
	}
	if read() != "Y" {
		t.Fatalf("the first run's teardown put the parameter back (%s) under the second", read())
	}
	if want := "still held by run " + b.ID; !strings.Contains(log.String(), want) {
		t.Errorf("teardown's log does not say %q:\n%s", want, log.String())
	}
	if _, err := Teardown(context.Background(), b.Dir, TeardownOptions{}); err != nil || read() != "N" {
		t.Fatalf("tearing down the second: %v; reads %s, want N", err, read())
	}
}

// TestKernelParamLapsed: a run directory removed by hand, without a
// teardown, leaves the parameter as the run set it with no ledger naming
// it. The audit of the host lists it all the same, and audit --fix puts
// back what it was before.
func TestKernelParamLapsed(t *testing.T) {
	read := testenv.FakeKernelParam(t, FUSEURingParam, "N")
	state, run := newTestRun(t)
	if _, err := run.SetKernelParam(FUSEURingParam, "Y", "test"); err != nil {
		t.Fatal(err)
	}
	run.Close()
	if err := os.RemoveAll(run.Dir); err != nil {
		t.Fatal(err)
	}
	res, err := Audit(context.Background(), AuditOptions{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) != 1 || res.Leftovers[0].Kind != manifests.ResourceKernelParam || !strings.Contains(res.Leftovers[0].Detail, "audit --fix puts N back") {
		t.Fatalf("audit: %+v", res.Leftovers)
	}
	if res, err := Fix(context.Background(), AuditOptions{StateDir: state}, nil); err != nil || len(res.Leftovers) != 0 {
		t.Fatalf("audit --fix: %v, left %+v", err, res.Leftovers)
	}
	if read() != "N" {
		t.Errorf("after audit --fix the parameter reads %s, want N", read())
	}
}
