package manifests

import (
	"strings"
	"testing"
)

func validPlan() *RunPlan {
	d := DigestOf([]byte("runner"))
	return &RunPlan{
		FormatVersion: ResultsFormatVersion, Kind: RunPlanKind, RunID: "20261201T180000-3f9a1c", BundleID: "build-linux-0123456789ab",
		Ledger: "/var/lib/sealbench/runs/20261201T180000-3f9a1c/ledger.jsonl", Lock: "/run/lock/sealbench.lock", OutDir: "/tmp/out",
		Targets: []PlanTarget{{TargetPins: TargetPins{Name: "local", Engine: EngineStandin, Kernel: "6.1", CPUs: 2, MemoryBytes: 1 << 30,
			Endpoint: "unix:///run/standin.sock"}}},
		Image: PlanImage{ID: d, Ref: "sealbench/sandbox:x"}, Cells: []string{"C01"}, Samples: 5, Seed: 7,
		RunnerSHA256: d, StandinSHA256: d,
	}
}

func TestRunPlanRoundTrips(t *testing.T) {
	b, err := validPlan().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ReadRunPlan(strings.NewReader(string(b)))
	if err != nil || p.Targets[0].Endpoint != "unix:///run/standin.sock" || p.Samples != 5 || p.StopOnStdinEOF {
		t.Fatalf("ReadRunPlan: %+v, %v", p, err)
	}
	if strings.Contains(string(b), "stopOnStdinEOF") {
		t.Errorf("a plan for a runner here names stopOnStdinEOF:\n%s", b)
	}
	remote := validPlan()
	remote.StopOnStdinEOF = true
	b, _ = remote.Marshal()
	if p, err := ReadRunPlan(strings.NewReader(string(b))); err != nil || !p.StopOnStdinEOF {
		t.Fatalf("ReadRunPlan of a remote runner's plan: %+v, %v", p, err)
	}
}

// TestRunPlanRefusesBadPlans: the runner reads a plan strictly, and every
// problem names its field.
func TestRunPlanRefusesBadPlans(t *testing.T) {
	for _, tc := range []struct {
		edit func(p *RunPlan)
		want string
	}{
		{func(p *RunPlan) { p.Kind = "sealbench.pins" }, "kind"},
		{func(p *RunPlan) { p.OutDir = "out/runs/x" }, "outDir"},
		{func(p *RunPlan) { p.Targets = nil }, "targets"},
		{func(p *RunPlan) { p.Targets = append(p.Targets, p.Targets[0]) }, "listed twice"},
		{func(p *RunPlan) { p.Cells = []string{"C01", "C01"} }, "cells[1]"},
		{func(p *RunPlan) { p.Samples = 0 }, "samples"},
		{func(p *RunPlan) { p.RunnerSHA256 = Digest{} }, "runnerSha256"},
		{func(p *RunPlan) { p.Targets[0].Engine = "podman" }, "engine"},
		{func(p *RunPlan) { p.Targets[0].FUSEURing = "yes" }, "targets[0].fuseURing"},
	} {
		p := validPlan()
		tc.edit(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
	b, _ := validPlan().Marshal()
	extra := strings.Replace(string(b), `"kind"`, `"surprise": 1, "kind"`, 1)
	if _, err := ReadRunPlan(strings.NewReader(extra)); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("an unknown field: %v", err)
	}
	if _, err := ReadRunPlan(strings.NewReader(string(b) + "{}")); err == nil {
		t.Error("trailing data was accepted")
	}
}

// TestSandboxSumsLeaveOutOtherOSes: the Sandbox image holds the Linux
// binaries only, and its SHA256SUMS lists exactly what it holds.
func TestSandboxSumsLeaveOutOtherOSes(t *testing.T) {
	m := &BundleManifest{}
	for _, p := range []string{"bin/darwin-arm64/sealbench", "bin/linux-amd64/sealbench", "bin/linux-arm64/layerfsd", "cells/C01.sh"} {
		m.Files = append(m.Files, BundleFile{Path: p, Size: 1, Mode: 0o644, Digest: DigestOf([]byte(p))})
	}
	all, sb := string(m.SHA256SUMS()), string(m.SandboxSHA256SUMS())
	if !strings.Contains(all, "bin/darwin-arm64/sealbench") || strings.Count(all, "\n") != 4 {
		t.Errorf("SHA256SUMS:\n%s", all)
	}
	if strings.Contains(sb, "darwin") || strings.Count(sb, "\n") != 3 || !strings.Contains(sb, "cells/C01.sh") {
		t.Errorf("the Sandbox's SHA256SUMS:\n%s", sb)
	}
}
