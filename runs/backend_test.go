package runs

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
)

// recordingBackend holds a set of VMs and records what it is asked.
type recordingBackend struct {
	vms     map[string]bool
	removed []string
}

func (b *recordingBackend) Remove(_ context.Context, _ string, e manifests.LedgerEntry) error {
	if e.Kind != manifests.ResourceVM {
		return ErrGeneric
	}
	b.removed = append(b.removed, e.Key)
	delete(b.vms, e.Key)
	return nil
}

func (b *recordingBackend) Exists(_ context.Context, _ string, e manifests.LedgerEntry) (bool, string, error) {
	if e.Kind != manifests.ResourceVM {
		return false, "", ErrGeneric
	}
	return b.vms[e.Key], "a test VM", nil
}

func (b *recordingBackend) Audit(context.Context, string) ([]Resource, []string, error) {
	var out []Resource
	for k := range b.vms {
		out = append(out, Resource{Kind: manifests.ResourceVM, Key: k, Detail: "labelled"})
	}
	return out, []string{"checked the test tool"}, nil
}

// TestBackendsReachTheirResources: a VM in a run's ledger is removed by its
// target's backend, the generic code still removes the rest (a directory
// of the target), the audit asks the backend, and a VM of a target with no
// backend is an error that names the target, not a silent success.
func TestBackendsReachTheirResources(t *testing.T) {
	b := &recordingBackend{vms: map[string]bool{"sealbench-vm-1": true, "orphan-vm": true}}
	RegisterBackend("testvm", 0, b)
	defer unregisterBackend("testvm")
	state, run := newTestRun(t)
	dir := filepath.Join(run.Dir, "testvm")
	for _, e := range []manifests.LedgerEntry{
		{Target: "testvm", Kind: manifests.ResourceDir, Key: dir},
		{Target: "testvm", Kind: manifests.ResourceVM, Key: "sealbench-vm-1", Exe: "/usr/bin/testvm"},
	} {
		if err := run.Ledger.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	a, err := Audit(ctx, AuditOptions{StateDir: state, Targets: []string{"testvm"}})
	if err != nil {
		t.Fatal(err)
	}
	// Both VMs (the one in the ledger, and the orphan only the tool
	// lists), and the run's own directory, since its target holds something.
	var got []string
	for _, r := range a.Leftovers {
		got = append(got, r.Target+" "+string(r.Kind)+" "+r.Key)
	}
	sort.Strings(got)
	want := []string{" dir " + run.Dir, "testvm vm orphan-vm", "testvm vm sealbench-vm-1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("audit found %q, want %q", got, want)
	}
	if len(a.Notes) != 1 || a.Notes[0] != "testvm: checked the test tool" {
		t.Errorf("notes: %q", a.Notes)
	}
	run.Close()
	if _, err := Teardown(ctx, run.Dir, TeardownOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(b.removed, ",") != "sealbench-vm-1" || b.vms["sealbench-vm-1"] {
		t.Errorf("the backend removed %q", b.removed)
	}

	// A VM whose target has no backend in this build.
	_, run2 := newTestRun(t)
	e := manifests.LedgerEntry{Target: "elsewhere", Kind: manifests.ResourceVM, Key: "vm-2", Exe: "/usr/bin/other"}
	err = RemoveResource(ctx, run2.Dir, e, 0)
	if err == nil || !strings.Contains(err.Error(), `target "elsewhere"`) || !strings.Contains(err.Error(), "no provisioner") {
		t.Errorf("removing a VM nobody provisions: %v", err)
	}
	if _, _, err := Exists(ctx, run2.Dir, e); err == nil {
		t.Error("Exists of a VM nobody provisions: no error")
	}

}
