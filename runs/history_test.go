package runs

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunKnown: a run is known while its directory is there and after it
// is gone (the history names it); an id never made is not, nor a bad one.
func TestRunKnown(t *testing.T) {
	state := t.TempDir()
	r, err := NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !RunKnown(state, r.ID) {
		t.Errorf("run %s, just made, is unknown", r.ID)
	}
	if err := os.RemoveAll(r.Dir); err != nil {
		t.Fatal(err)
	}
	if !RunKnown(state, r.ID) {
		t.Errorf("run %s, torn down, is unknown", r.ID)
	}
	for _, id := range []string{"20200101T000000-abcdef", "../../etc", ""} {
		if RunKnown(state, id) {
			t.Errorf("run %q, never made, is known", id)
		}
	}
}

// TestHostsHistory: every host a run used is kept, with how it is
// reached; the audit asks every one, those of one run with --run, only
// those --target names when it names targets; a line that does not
// parse is refused, naming it, rather than a host skipped.
func TestHostsHistory(t *testing.T) {
	state := t.TempDir()
	a, b := "ssh://root@gpu1:22", "ssh://bench@[fd00::7]:2222"
	for _, u := range []struct {
		run string
		h   HostRecord
	}{
		{"20261129T085500-3f9a1c", HostRecord{Host: a, KnownHosts: "/k1"}},
		{"20261129T085500-3f9a1c", HostRecord{Host: b}},
		{"20261130T085500-aaaaaa", HostRecord{Host: a, KnownHosts: "/k2", Identity: "/id"}},
	} {
		if err := RecordHostUse(state, u.run, u.h); err != nil {
			t.Fatal(err)
		}
	}
	if err := RecordHostUse(state, "x/../y", HostRecord{Host: a}); err == nil {
		t.Error("a bad run id recorded")
	}
	if err := RecordHostUse(state, "20261130T085500-aaaaaa", HostRecord{Host: "gpu1"}); err == nil {
		t.Error("a host not as ssh://user@host:port recorded")
	}
	for _, tt := range []struct {
		o    AuditOptions
		want map[string]HostRecord
	}{
		{AuditOptions{}, map[string]HostRecord{a: {Host: a, KnownHosts: "/k2", Identity: "/id"}, b: {Host: b}}},
		{AuditOptions{Run: "20261129T085500-3f9a1c"}, map[string]HostRecord{a: {Host: a, KnownHosts: "/k1"}, b: {Host: b}}},
		{AuditOptions{Targets: []string{"docker"}}, map[string]HostRecord{}},
		{AuditOptions{Targets: []string{"h"}, Hosts: []string{b, "ssh://u@new:22"}}, map[string]HostRecord{b: {Host: b}, "ssh://u@new:22": {Host: "ssh://u@new:22"}}},
	} {
		got, err := tt.o.auditHosts(state)
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("auditHosts(%+v) = %v, %v; want %v", tt.o, got, err, tt.want)
		}
	}
	f, err := os.OpenFile(filepath.Join(state, HostsHistoryFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"run":"20261130T085500-aaaaaa","host":"gpu1"}` + "\n")
	f.Close()
	if _, err := (AuditOptions{}).auditHosts(state); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("a bad line: %v, want it named", err)
	}
}

// TestAuditOfAnUnreachableHost: a host of the history that cannot be
// reached is a note, and the audit goes on; one --target names is an
// error.
func TestAuditOfAnUnreachableHost(t *testing.T) {
	state := t.TempDir()
	// Nothing listens on port 1 of 127.0.0.1: the connection is refused.
	gone := "ssh://root@127.0.0.1:1"
	if err := RecordHostUse(state, "20261129T085500-3f9a1c", HostRecord{Host: gone, KnownHosts: filepath.Join(state, "known_hosts")}); err != nil {
		t.Fatal(err)
	}
	res, err := Audit(context.Background(), AuditOptions{StateDir: state, Targets: []string{TargetLocal}})
	if err != nil || len(res.Notes) != 0 {
		t.Errorf("audit --target local: %v, notes %q: want no host asked", err, res.Notes)
	}
	ctx := context.Background()
	res, err = Audit(ctx, AuditOptions{StateDir: state})
	if err != nil {
		t.Fatalf("audit: %v, want the unreachable host noted", err)
	}
	noted := false
	for _, n := range res.Notes {
		noted = noted || strings.Contains(n, "not checked: host "+gone)
	}
	if !noted {
		t.Errorf("notes %q: want %s not checked", res.Notes, gone)
	}
	if _, err := Audit(ctx, AuditOptions{StateDir: state, Targets: []string{"h"}, Hosts: []string{gone}}); err == nil || !strings.Contains(err.Error(), "cannot audit "+gone) {
		t.Errorf("audit --target h=docker@%s: %v, want it refused", gone, err)
	}
}
