//go:build !sealbench_bundle

package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/docker"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/vmimages"
)

// sealed is a bundle this tree seals once for the package's run tests,
// with its real Sandbox image (pinned Debian packages).
type sealed struct {
	Name, Dir, PubKey string
	ImageRef          string
}

var (
	sealOnce sync.Once
	sealDir  string
	sealOut  sealed
	sealErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) != "" { // a shell's completion script calls it as sealbench
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	// The package's runs leave the host's enable_uring as it is (and serve
	// LayerFS over /dev/fuse), so that they do not hold it on for minutes
	// under the other packages' tests that change it;
	// TestProvisionFUSEURing says what it wants.
	if os.Getenv(fuseURingEnv) == "" {
		os.Setenv(fuseURingEnv, "off")
	}
	code := m.Run()
	if sealDir != "" {
		os.RemoveAll(sealDir)
	}
	os.Exit(code)
}

// sealForRun seals this tree (keygen, seal with the image) once per test
// binary; the run tests share it.
func sealForRun(t *testing.T) sealed {
	t.Helper()
	testenv.Short(t, "seals a bundle with its Sandbox image and runs cells")
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
	testenv.NeedCommand(t, "apt-get")
	root := testenv.ModuleRoot(t)
	sealOnce.Do(func() {
		if sealDir, sealErr = os.MkdirTemp("", "sealbench-run-test-"); sealErr != nil {
			return
		}
		t.Setenv("SEALBENCH_PASSWORD", "")
		keys, out := filepath.Join(sealDir, "keys"), filepath.Join(sealDir, "out")
		if code, _, stderr := run(t, "keygen", "--out", keys); code != ExitOK {
			sealErr = fmt.Errorf("keygen: %s", stderr)
			return
		}
		// The bundle holds a suite of a user's own too (testdata/mysuite),
		// which TestRunSuiteOnLocalAndDocker runs.
		code, stdout, stderr := run(t, "seal", "--json", "--key", filepath.Join(keys, "sealbench.key"), "--out", out, "--source", root,
			"--suite-dir", filepath.Join(root, "cmd", "sealbench", "cmd", "testdata", "mysuite"))
		if code != ExitOK {
			sealErr = fmt.Errorf("seal: exit %d\n%s", code, stderr)
			return
		}
		var s struct {
			Name, Dir string
			Image     struct{ Ref string }
		}
		if sealErr = json.Unmarshal([]byte(stdout), &s); sealErr != nil {
			return
		}
		sealOut = sealed{Name: s.Name, Dir: s.Dir, PubKey: filepath.Join(keys, "sealbench.pub"), ImageRef: s.Image.Ref}
	})
	if sealErr != nil {
		t.Fatal(sealErr)
	}
	return sealOut
}

// shortStateDir makes a short state directory (the stand-in's socket
// lives under it) and points SEALBENCH_STATE_DIR at it.
func shortStateDir(t *testing.T) string {
	state := testenv.ShortTempDir(t, "sbr-")
	t.Setenv(runs.StateDirEnv, state)
	return state
}

// auditNothingLeft runs `sealbench audit --json` with args and fails the
// test on anything left of this state directory's runs. What the label
// alone shows of runs the state directory never made (foreign) belongs to
// other tests sharing the dockerd, in progress: it is logged, not failed.
func auditNothingLeft(t *testing.T, args ...string) {
	t.Helper()
	code, stdout, stderr := run(t, append([]string{"audit", "--json"}, args...)...)
	var res struct {
		Leftovers []runs.Resource `json:"leftovers"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Errorf("audit: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
		return
	}
	var ours []string
	for _, r := range res.Leftovers {
		if r.Foreign {
			t.Logf("audit: another state directory's, in progress: %s", r)
		} else {
			ours = append(ours, r.String())
		}
	}
	if len(ours) > 0 || code != ExitOK && code != ExitLeftovers {
		t.Errorf("audit: exit %d, left:\n  %s\n%s", code, strings.Join(ours, "\n  "), stderr)
	}
}

// TestRunOnLocalAndDocker is the product's main job on real targets: one
// `sealbench run --target local,docker` provisions both from a sealed
// bundle, runs all twelve cells twice with --native through the bundle's
// own runner, reports, tears down and audits. Every verifier passes, the
// exact counts are equal on both targets, both sides of every ratio
// followed one cache protocol (as the samples' recorded phases show), the
// pins name the runner that ran, and nothing of the run is left on the
// host or in dockerd.
func TestRunOnLocalAndDocker(t *testing.T) {
	b := sealForRun(t)
	testenv.NeedDocker(t)
	state := shortStateDir(t)
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", "--json", "--target", "local,docker", "--bundle", b.Dir, "--key", b.PubKey,
		"--id", b.Name, "--native", "--samples", "2", "--seed", "1", "--out", out)
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var o orchestrate.RunOutcome
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatalf("run --json: %v\n%s", err, stdout)
	}
	if o.Samples != 48 || o.Failed != 0 || o.Kept || len(o.Leftovers) != 0 || o.Teardown == nil || len(o.Targets) != 2 {
		t.Errorf("outcome: %+v", o)
	}
	if !strings.Contains(stderr, "sampling with the bundle's runner") {
		t.Errorf("the run did not say it sampled with the bundle's runner:\n%.3000s", stderr)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(out, "samples.jsonl"))
	if err != nil || len(samples) != 48 {
		t.Fatalf("%d samples, %v", len(samples), err)
	}
	checkProtocol(t, samples)
	byCell := map[string]map[string]manifests.Sample{}
	for _, s := range samples {
		if s.Round != 0 {
			continue // the counts of round 0 stand for both (checkProtocol compared the rounds)
		}
		if s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass || s.CommandNs <= 0 || s.NativeNs == nil ||
			s.MountNs <= 0 || s.FUSETotal() == 0 || (s.Files == 0) != (s.Cell == "C03") ||
			(s.FUSETransport != "dev" && s.FUSETransport != "uring") {
			t.Errorf("%s %s: %+v", s.Target, s.Cell, s)
		}
		// Every Sandbox's exit is timed; TASK, which asks for it, is
		// timed as a whole task too: launch, window and exit, added.
		if s.ExitNs <= 0 || (s.Cell == "TASK") != (s.LaunchToExitNs > 0) ||
			s.Cell == "TASK" && s.LaunchToExitNs != s.ReadyNs+s.ExecWallNs+s.ExitNs {
			t.Errorf("%s %s: exit %d ns, launch to exit %d ns (ready %d, exec wall %d)", s.Target, s.Cell, s.ExitNs, s.LaunchToExitNs, s.ReadyNs, s.ExecWallNs)
		}
		if byCell[s.Cell] == nil {
			byCell[s.Cell] = map[string]manifests.Sample{}
		}
		byCell[s.Cell][s.Target] = s
	}
	// The same work on both: every exact count equal (but the kernel's
	// housekeeping requests, FORGET and the like, which come on its own time).
	work := func(m map[string]int64) string {
		w := map[string]int64{}
		for op, n := range m {
			if !manifests.KernelHousekeeping(op) {
				w[op] = n
			}
		}
		return fmt.Sprint(w)
	}
	for _, cell := range cells.Names() {
		l, d := byCell[cell]["local"], byCell[cell]["docker"]
		if l.Files != d.Files || l.Bytes != d.Bytes || l.Statements != d.Statements || work(l.FUSERequests) != work(d.FUSERequests) {
			t.Errorf("%s did different work: local %d files %d bytes %d statements %v; docker %d files %d bytes %d statements %v", cell,
				l.Files, l.Bytes, l.Statements, l.FUSERequests, d.Files, d.Bytes, d.Statements, d.FUSERequests)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "Every count is equal across all targets") {
		t.Errorf("report.md does not say the counts are equal (%v):\n%.2000s", err, md)
	}
	var pins manifests.RunPins
	if b, err := os.ReadFile(filepath.Join(out, "pins.json")); err != nil || json.Unmarshal(b, &pins) != nil || len(pins.Targets) != 2 || pins.End.IsZero() || pins.Tools["go"] == "" {
		t.Errorf("pins.json: %v %+v", err, pins)
	}
	// The runner that took the samples is the bundle's, byte for byte.
	mb, err := os.ReadFile(filepath.Join(b.Dir, manifests.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifests.ParseBundleManifest(mb)
	if err != nil {
		t.Fatal(err)
	}
	if want, ok := m.File(bundle.RunnerPath(runtime.GOOS, runtime.GOARCH)); !ok || pins.RunnerSHA256 != want.Digest || pins.RunnerPlatform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("pins.json: runner %s (%s), the manifest's is %s", pins.RunnerSHA256, pins.RunnerPlatform, want.Digest)
	}
	// The pins carry the package lock the Sandbox image was built from, byte
	// for byte the one kept beside the image.
	if lb, err := os.ReadFile(filepath.Join(b.Dir+".image", vmimages.SandboxLock)); err != nil || pins.ImageLock == nil {
		t.Errorf("pins.json has no image lock (%v), or the image has none beside it: %v", pins.ImageLock, err)
	} else if want, _ := manifests.ParsePackageLock(lb); !reflect.DeepEqual(want, pins.ImageLock) {
		t.Errorf("pins.json's image lock is not the image's:\n%+v\n%+v", pins.ImageLock, want)
	}
	// The run tore itself down: the audit of everything finds nothing.
	auditNothingLeft(t)
	if ents, _ := os.ReadDir(runs.RunsDir(state)); len(ents) != 0 {
		t.Errorf("runs left in the state directory: %v", ents)
	}
}

// TestRunSuiteOnLocalAndDocker is --suite on real targets: the
// agent-tools suite (its setups generating the inputs in the untimed
// setup; git, rg, cargo and npm from the Sandbox image's tools variant,
// which the run builds) and a suite of a user's own (--suite-dir, sealed
// into the bundle) run on local and docker with a native reference; every
// verifier passes, the exact counts are equal on both, TASK is timed from
// launch to exit, and the samples, pins and report name the suites and
// their cells.
func TestRunSuiteOnLocalAndDocker(t *testing.T) {
	b := sealForRun(t)
	testenv.NeedDocker(t)
	shortStateDir(t)
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", "--json", "--target", "local,docker", "--bundle", b.Dir, "--key", b.PubKey,
		"--id", b.Name, "--suite", "agent-tools", "--suite-dir", filepath.Join("testdata", "mysuite"), "--native", "--samples", "1", "--seed", "3", "--out", out)
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(out, "samples.jsonl"))
	if err != nil || len(samples) != 18 {
		t.Fatalf("%d samples, %v", len(samples), err)
	}
	checkProtocol(t, samples)
	byCell := map[string]map[string]manifests.Sample{}
	for _, s := range samples {
		if want := map[bool]string{true: "mine", false: "agent-tools"}[s.Cell == "M1"]; s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass || s.Suite != want || s.NativeNs == nil || s.Files == 0 {
			t.Errorf("%s %s: %+v", s.Target, s.Cell, s)
		}
		if byCell[s.Cell] == nil {
			byCell[s.Cell] = map[string]manifests.Sample{}
		}
		byCell[s.Cell][s.Target] = s
	}
	for _, cell := range []string{"T1", "T2", "T3", "T4", "T5", "T6", "T7", "TASK", "M1"} {
		l, d := byCell[cell]["local"], byCell[cell]["docker"]
		if l.Files != d.Files || l.Bytes != d.Bytes || l.Statements != d.Statements || l.StoreBytes != d.StoreBytes {
			t.Errorf("%s did different work: local %d files %d bytes %d statements %d Store bytes; docker %d files %d bytes %d statements %d Store bytes", cell,
				l.Files, l.Bytes, l.Statements, l.StoreBytes, d.Files, d.Bytes, d.Statements, d.StoreBytes)
		}
	}
	if l := byCell["T1"]["local"]; l.Files != 2048 || l.Bytes != 2048*1024 {
		t.Errorf("T1 on local: %d files, %d bytes; want the setup's 2,048 of 1,024 bytes", l.Files, l.Bytes)
	}
	var pins manifests.RunPins
	if b, err := os.ReadFile(filepath.Join(out, "pins.json")); err != nil || json.Unmarshal(b, &pins) != nil || strings.Join(pins.Suites, ",") != "agent-tools,mine" || len(pins.SuiteDefs) != 2 {
		t.Errorf("pins.json names suites %v, defines %d (%v)", pins.Suites, len(pins.SuiteDefs), err)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "T5 rg over 2,048 files") || !strings.Contains(string(md), "M1 copy ten setup files, list them") ||
		!strings.Contains(string(md), "T7 npm install of 32 packages") || !strings.Contains(string(md), "### The whole task, launch to exit") {
		t.Errorf("report.md does not name T5 and M1 with their titles (%v):\n%.3000s", err, md)
	}
	// The bundle must hold a suite run from a directory: one it does not
	// hold (here, changed since the seal) is refused before anything runs.
	changed := t.TempDir()
	for _, f := range []string{"suite.json", "setup.sh", "M1.sh"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mysuite", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "M1.sh" {
			b = append(b, "ls src >/dev/null\n"...)
		}
		if err := os.WriteFile(filepath.Join(changed, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = run(t, "run", "--target", "local", "--bundle", b.Dir, "--key", b.PubKey, "--suite-dir", changed, "--samples", "1")
	if code != ExitUnusable || !strings.Contains(stderr, "the bundle's suites/mine/M1.sh is not the suite's M1.sh") {
		t.Errorf("run with a suite the bundle does not hold: exit %d\n%s", code, stderr)
	}
}

// TestRunOnGVisor: `sealbench run --target gvisor` runs through the bundle's
// runner in Sandboxes under runsc. C01 passes its verifier over gVisor's
// FUSE; C12 (git maps files, which gVisor's FUSE cannot) is ineligible with
// its reason in one line, its native reference run all the same, shown by
// the report as not supported by this backend, and not counted as a
// failure: the run exits 0 and the audit finds nothing left.
func TestRunOnGVisor(t *testing.T) {
	b := sealForRun(t)
	testenv.NeedDockerRuntime(t, docker.GVisorRuntime)
	shortStateDir(t)
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", "--json", "--target", docker.GVisorName, "--bundle", b.Dir, "--key", b.PubKey,
		"--id", b.Name, "--native", "--cells", "C01,C12", "--samples", "1", "--seed", "1", "--out", out)
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var o orchestrate.RunOutcome
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatalf("run --json: %v\n%s", err, stdout)
	}
	if o.Samples != 2 || o.Failed != 0 || len(o.Leftovers) != 0 {
		t.Errorf("outcome: %+v", o)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(out, "samples.jsonl"))
	if err != nil || len(samples) != 2 {
		t.Fatalf("%d samples, %v", len(samples), err)
	}
	for _, s := range samples {
		switch s.Cell {
		case "C01":
			if s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass || s.Files != 1000 || s.FUSETransport != "dev" || s.NativeNs == nil {
				t.Errorf("C01 on gvisor: %+v", s)
			}
		case "C12":
			if s.Status != manifests.StatusIneligible || !strings.Contains(s.Reason, "mmap") || strings.Contains(s.Reason, "\n") ||
				s.Verifier != manifests.VerifierNotRun || s.NativeNs == nil || s.ExecWallNs <= 0 || s.ExecOverheadNs != s.ExecWallNs-s.CommandNs {
				t.Errorf("C12 on gvisor: want ineligible, saying why in one line, with the native reference and its exec overhead: %+v", s)
			}
		}
	}
	var pins manifests.RunPins
	if b, err := os.ReadFile(filepath.Join(out, "pins.json")); err != nil || json.Unmarshal(b, &pins) != nil || len(pins.Targets) != 1 {
		t.Fatalf("pins.json: %v %+v", err, pins)
	}
	if p := pins.Targets[0]; p.Runtime != docker.GVisorRuntime || p.FUSE != manifests.FUSEGVisor || p.RuntimeVersion == "" || p.RuntimePlatform != "systrap" {
		t.Errorf("gvisor's pins: %+v", p)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "- gvisor C12 round 0: not supported by this backend: gVisor's FUSE cannot mmap(2)") ||
		strings.Contains(string(md), "Failed samples") || !strings.Contains(string(md), "(1 not supported by this backend)") {
		t.Errorf("report.md does not show C12 as not supported (%v):\n%.3000s", err, md)
	}
	auditNothingLeft(t)
}

// checkProtocol checks, from the phases each sample recorded (never from
// timings), that LayerFS, the native reference and its A/A repeat
// followed one cache protocol (runner.CheckProtocol: on each side a
// warm-up whose output is then discarded, a barrier, a prefault and the
// timed run in a fresh directory; each cell's rounds rotating which side
// goes first), that every sample timed the repeat, and that more than
// one side went first in the run.
func checkProtocol(t *testing.T, samples []manifests.Sample) {
	t.Helper()
	if err := runner.CheckProtocol(samples); err != nil {
		t.Error(err)
	}
	seen := map[string]int{}
	for _, s := range samples {
		if len(s.Phases) != 6 || s.First == "" || s.Protocol != manifests.ProtocolVersion || s.NativeRepeatNs == nil {
			t.Errorf("%s %s round %d: protocol %d, first %q, repeat %v, phases %+v: want every side's warm-up and timed run, the A/A repeat's too",
				s.Target, s.Cell, s.Round, s.Protocol, s.First, s.NativeRepeatNs, s.Phases)
		}
		seen[s.First]++
	}
	if len(seen) < 2 {
		t.Errorf("went first: %v: the sides do not take turns", seen)
	}
}

// TestRunRefusesBadInput: each bad flag is a usage error (exit 3) that
// names the problem, before anything is made.
func TestRunRefusesBadInput(t *testing.T) {
	state := shortStateDir(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "--target or --engine is required"},
		{[]string{"run", "--target", "local", "--engine", "unix:///x.sock"}, "not both"},
		{[]string{"run", "--target", "nowhere"}, `no target named "nowhere"`},
		{[]string{"run", "--target", "docker,docker"}, "named twice"},
		{[]string{"run", "--engine", "unix:///x.sock", "--name", "Bad Name"}, "is not a target name"},
		{[]string{"run", "--target", "docker", "--cells", "C13"}, "C13"},
		{[]string{"run", "--target", "docker", "--suite", "nope"}, `unknown suite "nope" (the suites are cells, agent-tools`},
		{[]string{"run", "--target", "docker", "--suite", "agent-tools", "--cells", "C01"}, `unknown cell "C01" (the cells are agent-tools: T1,T2,T3,T4,T5,T6,T7,TASK)`},
		{[]string{"run", "--target", "docker", "--samples", "0"}, "--samples"},
		{[]string{"run", "--target", "docker", "--id", "v1"}, "not a bundle name"},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != ExitUnusable || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tc.args, code, ExitUnusable, tc.want, stderr)
		}
	}
	if ents, _ := os.ReadDir(runs.RunsDir(state)); len(ents) != 0 {
		t.Errorf("bad input made runs: %v", ents)
	}
}

// TestRunCrashTrials kills `sealbench run` with SIGKILL at seeded points
// (while provisioning, during a cell, during teardown), then checks that
// `sealbench teardown --run ID` and `sealbench audit` leave nothing: no
// container, image, mount, process or directory of the run.
func TestRunCrashTrials(t *testing.T) {
	b := sealForRun(t)
	docker := testenv.NeedDocker(t)
	state := shortStateDir(t)
	bin := filepath.Join(t.TempDir(), "sealbench")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(testenv.ModuleRoot(t), "cmd", "sealbench")).CombinedOutput(); err != nil {
		t.Fatalf("building sealbench: %v\n%s", err, out)
	}
	// Each trial waits for a line of the run's log, then kills after a
	// seeded delay.
	trials := []struct {
		name     string
		after    *regexp.Regexp
		maxDelay int // ms
	}{
		{"provisioning", regexp.MustCompile(`run \S+: ledger in`), 400},
		{"provisioning docker", regexp.MustCompile(`local: standin`), 400},
		{"during a cell", regexp.MustCompile(`(local|docker) C01 \d/4 round \d+: ok`), 400},
		{"during a cell with a base", regexp.MustCompile(`C09 \d/4 round \d+: ok`), 400},
		{"during teardown", regexp.MustCompile(`removed container`), 1},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for _, tr := range trials {
		t.Run(strings.ReplaceAll(tr.name, " ", "_"), func(t *testing.T) {
			delay := time.Duration(rng.IntN(tr.maxDelay)) * time.Millisecond
			cmd := exec.Command(bin, "run", "-v", "--target", "local,docker", "--bundle", b.Dir, "--key", b.PubKey,
				"--cells", "C01,C09", "--samples", "1", "--seed", "3", "--out", t.TempDir())
			cmd.Env = os.Environ()
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			runID, killed := watchAndKill(t, cmd, stderr, tr.after, delay)
			if runID == "" {
				t.Fatal("the run never said its id")
			}
			if !killed {
				t.Fatalf("the run ended before %q showed up", tr.after)
			}
			t.Logf("killed run %s %v after %q", runID, delay, tr.after)
			// The crash left the run behind (at least its directory and
			// ledger), and the audit says so...
			if code, stdout, _ := run(t, "audit", "--run", runID, "--json"); code != ExitLeftovers {
				t.Errorf("audit right after the crash: exit %d, want %d (leftovers)\n%s", code, ExitLeftovers, stdout)
			} else {
				t.Logf("left by the crash: %s", stdout)
			}
			// ...until teardown, from the ledger alone, removes it all.
			if code, _, stderr := run(t, "teardown", "--run", runID); code != ExitOK {
				t.Errorf("teardown after the crash: exit %d\n%s", code, stderr)
			}
			auditNothingLeft(t)
			if ents, _ := os.ReadDir(runs.RunsDir(state)); len(ents) != 0 {
				t.Errorf("left in the state directory: %v", ents)
			}
			if out, _ := exec.Command(docker, "ps", "-aq", "--filter", "label="+manifests.RunLabel+"="+runID).Output(); len(strings.TrimSpace(string(out))) != 0 {
				t.Errorf("containers of run %s left in dockerd: %s", runID, out)
			}
		})
	}
}

// watchAndKill reads the run's log until after matches, then kills it
// with SIGKILL after delay. It returns the run id the log named, and
// whether the kill came before the run ended by itself.
func watchAndKill(t *testing.T, cmd *exec.Cmd, stderr io.Reader, after *regexp.Regexp, delay time.Duration) (string, bool) {
	t.Helper()
	idRE := regexp.MustCompile(`run (\S+): ledger in`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	go func() {
		<-ctx.Done()
		cmd.Process.Kill()
	}()
	var runID string
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if m := idRE.FindStringSubmatch(line); m != nil {
			runID = m[1]
		}
		if after.MatchString(line) {
			time.Sleep(delay)
			err := cmd.Process.Signal(syscall.SIGKILL)
			go io.Copy(io.Discard, stderr)
			cmd.Wait()
			return runID, err == nil
		}
	}
	cmd.Wait()
	t.Logf("the run's log:\n%s", log.String())
	return runID, false
}

// TestRunConsole: without -v, a run's console says each step, a line per
// cell done on a target and the summary, with no per-sample or
// per-resource line and no Markdown; the reports are written in every
// format and named at the end. (-v's lines: TestRunProgressInALog, and
// the crash test, which waits for them.)
func TestRunConsole(t *testing.T) {
	b := sealForRun(t)
	shortStateDir(t)
	out := filepath.Join(t.TempDir(), "results")
	code, stdout, stderr := run(t, "run", "--target", "local", "--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name,
		"--native", "--cells", "C01", "--samples", "2", "--seed", "5", "--out", out)
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"Ran:", "Counts:", "local  LayerFS over native ", "Samples: 2 samples, 0 failed",
		"Audit:   torn down (", "Reports: " + filepath.Join(out, "report.md") + "  " + filepath.Join(out, "report.html") + "  " + filepath.Join(out, "report.json")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "| ---") || strings.Contains(stdout, "**") || strings.Contains(stdout, "## ") {
		t.Errorf("Markdown on the console:\n%s", stdout)
	}
	if strings.Contains(stderr, "round 1: ok") || strings.Contains(stderr, "removed ") {
		t.Errorf("per-sample or per-resource lines without -v:\n%s", stderr)
	}
	if !strings.Contains(stderr, "C01 create 1,000 files done on local: 2 samples, ok") || !strings.Contains(stderr, "tore down run ") {
		t.Errorf("no line for the cell done, or for the teardown:\n%s", stderr)
	}
	for _, f := range []string{"report.md", "report.html", "report.json"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
