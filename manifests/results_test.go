package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

func testPins() *RunPins {
	return &RunPins{
		FormatVersion: ResultsFormatVersion,
		Kind:          RunPinsKind,
		RunID:         "run-20261130T101500Z",
		BundleID:      "build-linux-bb5f636a0c1d",
		ImageID:       DigestOf([]byte("image")),
		RunnerSHA256:  DigestOf([]byte("runner")),
		StandinSHA256: DigestOf([]byte("standin")),
		Targets: []TargetPins{
			{Name: "docker", Engine: EngineDockerd, Kernel: "6.1.0-40-amd64", CPUs: 2, MemoryBytes: 8 << 30, FUSEURing: FUSEURingOn,
				Endpoint: "unix:///home/bench/.colima/default/docker.sock", DockerContext: "colima"},
			{Name: "lima", Engine: EngineStandin, Kernel: "6.1.0-41-amd64", CPUs: 2, MemoryBytes: 4 << 30, Emulated: true, FUSEURing: FUSEURingNA},
			{Name: "docker-gpu1", Engine: EngineDockerd, Kernel: "6.12.48-amd64", CPUs: 16, MemoryBytes: 64 << 30, Transport: "ssh", FUSEURing: FUSEURingNA,
				Host: "ssh://bench@gpu1:22"},
		},
		StoreProfile:        StoreDisposable,
		ConstructionWorkers: 1,
		Tools:               map[string]string{"docker": "20.10.24", "git": "2.39.5", "go": "go1.26.8"},
		Cells:               []string{"C01", "C09"},
		Seed:                42,
		Samples:             1,
		Start:               time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC),
		End:                 time.Date(2026, 11, 30, 10, 25, 0, 0, time.UTC),
		Machines: []Machine{
			{PageReporting: PageReportingActive, ReportedKiBStart: ptr(int64(18874368)), ReportedKiBEnd: ptr(int64(19922944)), Balloon: true,
				TransparentHugepages: "madvise"},
			{Host: "ssh://bench@gpu1:22", PageReporting: PageReportingInactive, TransparentHugepages: "always", SwapBytes: 8 << 30, CPUFreqGovernor: "performance"},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func testSample(target, cell string, order int) Sample {
	start := time.Date(2026, 11, 30, 10, 16, order, 0, time.UTC)
	native, repeat := int64(2_500_000), int64(2_550_000)
	return Sample{
		FormatVersion: ResultsFormatVersion,
		RunID:         "run-20261130T101500Z",
		BundleID:      "build-linux-bb5f636a0c1d",
		Target:        target, Cell: cell, Order: order,
		Status: StatusOK, Verifier: VerifierPass,
		CommandNs: 25_000_000, ExecWallNs: 29_000_000, ExecOverheadNs: 4_000_000,
		MountNs: 6_000_000, UnmountNs: 2_000_000, CommitNs: 30_000_000, NativeNs: &native, NativeRepeatNs: &repeat, Protocol: ProtocolVersion,
		FUSERequests: map[string]int64{"CREATE": 1000, "LOOKUP": 1001, "WRITE": 1000},
		Statements:   4321, StoreBytes: 1 << 20, OverlayBytes: 8893, Files: 1000, Bytes: 8893,
		Load1: 1.92, Start: start, End: start.Add(time.Second),
		FUSETransport: "uring",
	}
}

func TestResultsGolden(t *testing.T) {
	pins, err := testPins().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, "pins.golden.json", pins)
	back, err := ReadRunPins(bytes.NewReader(pins))
	if err != nil {
		t.Fatalf("reading what Marshal wrote: %v", err)
	}
	if tp, ok := back.Target("lima"); !ok || !tp.Emulated || tp.Engine != EngineStandin || tp.Host != "" {
		t.Errorf("Target(lima) = %+v, %v", tp, ok)
	}
	if tp, ok := back.Target("docker-gpu1"); !ok || tp.Host != "ssh://bench@gpu1:22" || tp.RunnerHost != "" {
		t.Errorf("Target(docker-gpu1) = %+v, %v: want its host, and the runner on the machine that made the run", tp, ok)
	}

	var b bytes.Buffer
	failed := testSample("lima", "C09", 1)
	failed.Status, failed.Reason = StatusFailed, "verifier failed"
	failed.Verifier, failed.VerifierDetail = VerifierFail, "printed SHA-256: got 00.., want 5e.."
	for _, s := range []Sample{testSample("docker", "C01", 0), failed} {
		line, err := s.MarshalLine()
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
	}
	testenv.Golden(t, "samples.golden.jsonl", b.Bytes())
	samples, err := ReadSamples(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("reading what MarshalLine wrote: %v", err)
	}
	if len(samples) != 2 || samples[1].Status != StatusFailed || samples[0].FUSETotal() != 3001 || *samples[0].NativeNs != 2_500_000 {
		t.Errorf("read back %+v", samples)
	}
	if err := back.CheckSamples(samples); err != nil {
		t.Errorf("CheckSamples: %v", err)
	}
}

func TestFillDefaults(t *testing.T) {
	s := testSample("docker", "C01", 0)
	s.ExecOverheadNs, s.FUSERequests = 0, nil
	s.FillDefaults()
	if s.ExecOverheadNs != 4_000_000 || s.FUSERequests == nil {
		t.Errorf("FillDefaults left %d, %v", s.ExecOverheadNs, s.FUSERequests)
	}
	p := testPins()
	p.Kind, p.Samples, p.Tools = "", 0, nil
	p.FillDefaults()
	if p.Kind != RunPinsKind || p.Samples != 1 || p.Tools == nil {
		t.Errorf("FillDefaults left %+v", p)
	}
}

func TestReadSamplesRejects(t *testing.T) {
	line := func(mut func(*Sample)) string {
		s := testSample("docker", "C01", 0)
		if mut != nil {
			mut(&s)
		}
		b, err := s.MarshalLine()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	good := line(nil)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"truncated last line", good + good[:40], "line 2: the last line is cut off"},
		{"other format version", good + strings.Replace(good, `"formatVersion":1`, `"formatVersion":2`, 1), "line 2: format version 2; this sealbench reads version 1"},
		{"mixed bundle ids", good + line(func(s *Sample) { s.Cell = "C02"; s.BundleID = "build-linux-000000000000" }), "line 2: bundle id build-linux-000000000000 differs from build-linux-bb5f636a0c1d"},
		{"mixed run ids", good + line(func(s *Sample) { s.Cell = "C02"; s.RunID = "other" }), "line 2: run id \"other\" differs"},
		{"duplicate", good + good, "line 2: docker/C01 round 0 appears again (first on line 1)"},
		{"blank line", good + "\n" + good, "line 2: blank line"},
		{"unknown field", strings.Replace(good, `"target"`, `"extra":1,"target"`, 1), "line 1: parsing sample: json: unknown field \"extra\""},
		{"two values", strings.TrimSuffix(good, "\n") + " {}\n", "line 1: parsing sample: invalid character"},
		{"no version", "{}\n", "line 1: no formatVersion"},
		{"not JSON", "hello\n", "line 1: parsing sample"},
		{"invalid", line(func(s *Sample) { s.Status = "maybe" }), "line 1: invalid sample (1 problem)\n  status: \"maybe\" is not ok, failed or ineligible"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSamples(strings.NewReader(tt.in))
			if err == nil {
				t.Fatal("ReadSamples accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if _, err := ReadSamples(strings.NewReader(good + good[:10])); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v is not ErrTruncated", err)
	}
	if s, err := ReadSamples(strings.NewReader("")); err != nil || len(s) != 0 {
		t.Errorf("empty file: %v, %v", s, err)
	}
}

func TestSampleValidateNamesEveryField(t *testing.T) {
	s := testSample("Docker", "x1", 0)
	s.FormatVersion = 3
	s.RunID = ""
	s.BundleID = "build-linux-XYZ"
	s.Round, s.Order = -1, -1
	s.Reason = "why"
	s.Verifier = VerifierFail
	s.CommandNs, s.MountNs = 0, -1
	s.ExecOverheadNs = 5
	s.FUSERequests = map[string]int64{"lookup": 1, "READ": -1}
	s.FUSETransport = "io_uring"
	s.Load1 = -1
	s.End = s.Start.Add(-time.Second)
	wantProblems(t, s.Validate(), "formatVersion", "runId", "bundleId", "target", "cell", "round", "order", "reason", "verifier",
		"commandNs", "mountNs", "execOverheadNs", "fuseRequests", "fuseRequests.READ", "fuseTransport", "load1", "end")

	bad := testSample("docker", "C01", 0)
	bad.Status, bad.Verifier = StatusIneligible, VerifierNotRun
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "reason: missing") {
		t.Errorf("ineligible with no reason: %v", err)
	}
}

// The A/A fields and protocol 2's phases: each problem named by its field.
func TestSampleValidateAA(t *testing.T) {
	neg := int64(-1)
	barrier := func(b Barrier) []Phase {
		return []Phase{{Side: SideNative, Kind: PhaseTimed, Dir: "/run/sealbench/scratch/native2", Barrier: &b}}
	}
	for _, tc := range []struct {
		name string
		mut  func(*Sample)
		want string // the field and its message, or "" for valid
	}{
		{"the repeat beside its reference", func(s *Sample) {}, ""},
		{"a negative repeat", func(s *Sample) { s.NativeRepeatNs = &neg }, "nativeRepeatNs: must be positive when present"},
		{"a repeat without a reference", func(s *Sample) { s.NativeNs = nil }, "nativeRepeatNs: present without nativeNs"},
		{"protocol 2 or later without the repeat", func(s *Sample) { s.NativeRepeatNs = nil }, fmt.Sprintf("nativeRepeatNs: missing: under protocol %d", ProtocolVersion)},
		{"the precision rule's sample under protocol 3", func(s *Sample) { s.Precision, s.Protocol = true, 3 }, "precision: is set in a sample of protocol 3"},
		{"protocol 1 without the repeat", func(s *Sample) { s.NativeRepeatNs, s.Protocol = nil, 0 }, ""},
		{"a failed sample stops before the repeat", func(s *Sample) {
			s.NativeRepeatNs, s.Status, s.Reason, s.Verifier = nil, StatusFailed, "the repeat's body exited 1", VerifierNotRun
		}, ""},
		{"a protocol from the future", func(s *Sample) { s.Protocol = ProtocolVersion + 1 }, fmt.Sprintf("protocol: is %d", ProtocolVersion+1)},
		{"the repeat as a side", func(s *Sample) {
			s.First = SideNativeRepeat
			s.Phases = []Phase{{Side: SideNativeRepeat, Kind: PhaseWarmUp, Dir: "/w", Discarded: true}}
		}, ""},
		{"an unknown side", func(s *Sample) { s.First = "repeat" }, `first: "repeat" is not`},
		{"a prefault under protocol 1", func(s *Sample) {
			s.Protocol, s.NativeRepeatNs, s.Phases = 1, nil, barrier(Barrier{WaitNs: 9, PrefaultBytes: 1 << 20, PrefaultNs: 5})
		}, "phases[0].barrier.prefaultBytes: a prefault is protocol 2's"},
		{"a prefault longer than the wait", func(s *Sample) { s.Phases = barrier(Barrier{WaitNs: 9, PrefaultBytes: 1 << 20, PrefaultNs: 10}) }, "phases[0].barrier.prefaultNs: is 10, more than"},
		{"a negative prefault", func(s *Sample) { s.Phases = barrier(Barrier{WaitNs: 9, PrefaultBytes: -1}) }, "phases[0].barrier: has a negative count"},
		{"a timed run discarded", func(s *Sample) {
			s.Phases = barrier(Barrier{WaitNs: 9})
			s.Phases[0].Discarded = true
		}, "phases[0].discarded: a timed run's output is what the verifier checks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSample("docker", "C01", 0)
			tc.mut(&s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid sample refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want a problem %q", err, tc.want)
			}
		})
	}
}

func TestRunPinsValidateNamesEveryField(t *testing.T) {
	p := testPins()
	p.FormatVersion, p.Kind, p.RunID, p.BundleID = 0, "x", "", "nope"
	p.ImageID = Digest{}
	p.Targets = append(p.Targets, TargetPins{Name: "docker", Engine: "podman", FUSEURing: "Y", Host: "ssh://u:pw@gpu1:22", RunnerHost: "gpu1", WarmPool: -1})
	p.StoreProfile, p.ConstructionWorkers = "fastest", 0
	p.Tools = map[string]string{"git": ""}
	p.Cells = []string{"C01", "C01", "c2"}
	p.Samples = -1
	p.End = p.Start.Add(-time.Hour)
	p.BundleOrigin = &BundleOrigin{Ref: "docker://localhost:5000/b:v1"}
	p.Machines = append(p.Machines, Machine{Host: "gpu1", PageReporting: "on", ReportedKiBStart: ptr(int64(-1)), TransparentHugepages: "[always]", SwapBytes: -1},
		Machine{Host: "ssh://bench@gpu1:22", PageReporting: PageReportingUnknown})
	wantProblems(t, p.Validate(), "formatVersion", "kind", "runId", "bundleId", "imageId", "bundleOrigin.ref", "bundleOrigin.digest", "targets[3].name", "targets[3].engine",
		"targets[3].kernel", "targets[3].cpus", "targets[3].memoryBytes", "targets[3].fuseURing", "targets[3].host", "targets[3].runnerHost", "targets[3].warmPool",
		"machines[2].host", "machines[2].pageReporting", "machines[2].reportedKibStart", "machines[2].transparentHugepages", "machines[2].swapBytes", "machines[3].host",
		"storeProfile", "constructionWorkers", "tools", "cells[1]", "cells[2]", "samples", "end")
}

func TestReadRunPinsRejects(t *testing.T) {
	good, err := testPins().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, in, want string }{
		{"newer version", strings.Replace(string(good), `"formatVersion": 1`, `"formatVersion": 2`, 1), "format version 2"},
		{"unknown field", strings.Replace(string(good), `"kind"`, `"extra": 1, "kind"`, 1), "unknown field"},
		{"trailing", string(good) + "{}", "trailing data"},
		{"too large", strings.Repeat(" ", MaxPinsSize+1), "more than"},
	} {
		if _, err := ReadRunPins(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckSamples(t *testing.T) {
	p := testPins()
	s := testSample("apple", "C05", 0)
	s.RunID, s.BundleID, s.Round = "other", "build-linux-000000000000", 3
	err := p.CheckSamples([]Sample{testSample("docker", "C01", 0), s})
	for _, want := range []string{"samples[1].runId", "samples[1].bundleId", "samples[1].target", "samples[1].cell", "samples[1].round"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckSamples = %v, want it to name %s", err, want)
		}
	}
}
