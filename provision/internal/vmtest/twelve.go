package vmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/local"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/report"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/vmimages"
)

// EmulatedTarget is a VM target that says whether its CPU is emulated.
type EmulatedTarget interface {
	provision.Target
	Emulated() bool
}

// Twelve is a target other than local (a VM booted from the VM image, a
// Kubernetes cluster), as TwelveCellsLikeLocal drives it beside local.
type Twelve struct {
	Name string // the target's name
	// New returns the target of run for the sealed, verified bundle at
	// dir with manifest m, creating nothing.
	New func(t *testing.T, run *runs.Run, dir string, m *manifests.BundleManifest, img engine.Image) EmulatedTarget
	// CPUs and MemoryBytes are the VM's size New gives it; Kernel is in
	// its kernel's release (the VM image's cloud kernel).
	CPUs        int
	MemoryBytes int64
	Kernel      string
	// Holds is how many resources of each kind the VM's Inventory lists
	// after the run (the kinds not named are not counted).
	Holds map[manifests.ResourceKind]int
	// Dir is the VM's directory on the host, which Destroy must remove.
	Dir func(EmulatedTarget) string
	// Cells are the cells to run on both targets: all twelve when empty.
	Cells []string
	// Ineligible are the cells the target must find ineligible, each with
	// what its one-line reason must say (gVisor's FUSE cannot map a file:
	// C12); local runs them as any other.
	Ineligible map[string]string
	// Emulated says the target's CPU is emulated (QEMU TCG): its
	// Identity and the run's pins must say so, and must not otherwise.
	Emulated bool
}

// TwelveCellsLikeLocal is the whole flow: seal this tree with its Sandbox
// image, provision local and the VM target from it, run the twelve cells
// (or tw.Cells) on both, and require every verifier to pass with exact counts (FUSE
// requests by opcode, SQLite statements, files and bytes) equal to
// local's, but for the differences the report explains; then take the VM
// through the rest of its life (what it holds, the audit seeing it,
// Destroy twice) and tear the run down, with an audit that finds nothing
// left. A VM target runs the same checks inside its conformance suite's
// boot instead (Conformance).
func (tw Twelve) TwelveCellsLikeLocal(t *testing.T) {
	testenv.NeedFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	step := stepper(t)
	sb := seal(ctx, t, step)

	state := testenv.ShortTempDir(t, "sbl-") // the local stand-in's socket lives under it
	run, err := runs.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	torn := false
	defer func() {
		if !torn {
			run.Close()
			runs.Teardown(context.Background(), run.Dir, runs.TeardownOptions{Log: t.Logf})
		}
	}()
	vm := tw.New(t, run, sb.dir, sb.manifest, sb.img)
	if err := vm.Create(ctx); err != nil {
		t.Fatalf("creating %s: %v", vm.Name(), err)
	}
	step("created %s", vm.Name())
	tw.cells(ctx, t, step, run, state, sb, vm, 0)
	tw.lifecycle(ctx, t, run, state, vm)
	step("destroyed the VM")

	run.Close()
	torn = true
	res, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{Log: t.Logf})
	if err != nil {
		t.Fatalf("teardown: %v", err)
	}
	step("tore down %d resources", len(res.Removed))
	audit, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{local.Name, tw.Name}})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range audit.Leftovers {
		left = append(left, r.String())
	}
	if len(left) > 0 {
		t.Errorf("the audit after teardown finds:\n  %s", strings.Join(left, "\n  "))
	}
	if _, err := os.Stat(tw.Dir(vm)); !os.IsNotExist(err) {
		t.Errorf("the %s target's directory %s is still there: %v", tw.Name, tw.Dir(vm), err)
	}
}

// Conformance runs the conformance suite every Target passes
// (provisiontest) on the VM, made from this tree's sealed bundle, and, as
// one more test while the suite has it up (TwelveCellsLikeLocal), the
// cells beside local with TwelveCellsLikeLocal's checks: the suite's two
// boots serve both, where running them apart boots the VM three times
// (each boot is minutes under TCG). The suite's own tests run on its
// busybox image (their scripts are busybox's); the cells, on the Sandbox
// image, which the test installs. engineName is what the VM's Identity must
// say serves the Engine API; timeout bounds each of the suite's steps.
func (tw Twelve) Conformance(t *testing.T, engineName string, timeout time.Duration) {
	testenv.NeedRoot(t) // the local target beside the VM
	testenv.NeedFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	step := stepper(t)
	sb := seal(ctx, t, step)
	tb := provisiontest.GetBundle(t)
	provisiontest.Run(t, &provisiontest.Suite{
		New: func(t *testing.T, run *runs.Run) provision.Target {
			return tw.New(t, run, sb.dir, sb.manifest, sb.img)
		},
		Image:   tb.Image,
		Engine:  engineName,
		Timeout: timeout,
		WhileUp: map[string]provisiontest.Test{
			"TwelveCellsLikeLocal": func(t *testing.T, e *provisiontest.Env, _ *provisiontest.Suite) {
				vm := e.Target.(EmulatedTarget)
				// Holds counts the suite's image too.
				loc := tw.cells(ctx, t, step, e.Run, e.State, sb, vm, 1)
				if err := loc.Destroy(ctx); err != nil {
					t.Fatalf("destroying local: %v", err)
				}
				// Its Inventory, not the audit: the audit of local sees
				// the run's processes on this host, the VM's among them.
				inv, err := loc.Inventory(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range inv {
					t.Errorf("local still holds after its Destroy: %s", r)
				}
			},
		},
		Gone: func(t *testing.T, target provision.Target) {
			if d := tw.Dir(target.(EmulatedTarget)); d != "" {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("the %s target's directory %s is still there after Destroy: %v", tw.Name, d, err)
				}
			}
		},
	})
}

// CellsFromEnv are the cells the variable env names for a Twelve's Cells:
// "all" is every cell (nil), unset is def, and anything else a
// comma-separated list of cells.
func CellsFromEnv(t *testing.T, env string, def []string) []string {
	t.Helper()
	v := os.Getenv(env)
	switch v {
	case "all":
		return nil
	case "":
		return def
	}
	names := strings.Split(v, ",")
	for _, n := range names {
		if _, err := cells.Lookup(n); err != nil {
			t.Fatalf("%s=%s: %v", env, v, err)
		}
	}
	return names
}

// stepper logs a step with the seconds since the test began.
func stepper(t *testing.T) func(format string, args ...any) {
	start := time.Now()
	return func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// sealedTree is this tree sealed and verified, with its Sandbox image.
type sealedTree struct {
	dir, name string
	manifest  *manifests.BundleManifest
	img       engine.Image
	out       string // where the run's results go (results/)
}

// seal seals this tree with a new key, verifies the bundle and builds its
// Sandbox image.
func seal(ctx context.Context, t *testing.T, step func(string, ...any)) sealedTree {
	t.Helper()
	keys, out := t.TempDir(), t.TempDir()
	priv, pub, err := sign.WriteKeyPair(keys, []byte("pw"), false)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := bundle.Seal(ctx, bundle.SealOptions{Source: testenv.ModuleRoot(t), OutDir: out, Signer: signer, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	step("sealed %s", sealed.Name)
	verifier, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	verified, err := bundle.VerifyDir(ctx, sealed.Dir, bundle.VerifyOptions{Verifier: verifier, Expect: sealed.Name})
	if err != nil {
		t.Fatal(err)
	}
	lock, lockBytes, err := vmimages.DefaultLock("sandbox", runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	info, err := vmimages.BuildSandbox(ctx, vmimages.SandboxOptions{Bundle: sealed.Dir, Manifest: verified.Manifest, Lock: lock,
		LockBytes: lockBytes, Relock: true, OutDir: sealed.Dir + ".image", Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	img := engine.Image{Tar: info.Tar, Ref: info.Ref, ID: info.ID}
	step("built the Sandbox image %s", img.ID.Short(12))
	return sealedTree{dir: sealed.Dir, name: sealed.Name, manifest: verified.Manifest, img: img, out: out}
}

// cells provisions local in run beside vm (created already), installs the
// Sandbox image on both, runs the cells on both and checks every sample
// and count against local's, then what vm holds (Holds, with moreImages
// images of other tests besides) and that the audit sees it. It returns
// the local target, which the caller destroys.
func (tw Twelve) cells(ctx context.Context, t *testing.T, step func(string, ...any), run *runs.Run, state string, sb sealedTree, vm EmulatedTarget, moreImages int) provision.Target {
	t.Helper()
	names := tw.Cells
	if len(names) == 0 {
		names = cells.Names()
	}
	standin, ok := sb.manifest.File(local.StandinBundlePath())
	if !ok {
		t.Fatalf("the bundle has no %s", local.StandinBundlePath())
	}
	loc, err := local.New(local.Options{Run: run, Bundle: sb.dir, Standin: standin.Digest, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := loc.Create(ctx); err != nil {
		t.Fatalf("creating local: %v", err)
	}
	step("created local")
	for _, target := range []provision.Target{loc, vm} {
		if err := target.InstallImage(ctx, sb.img); err != nil {
			t.Fatalf("installing the image on %s: %v", target.Name(), err)
		}
		id, err := target.Identity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		step("provisioned %s: kernel %s, %d CPUs, %d MiB", target.Name(), id.Kernel, id.CPUs, id.MemoryBytes>>20)
	}
	if vm.Emulated() != tw.Emulated {
		t.Errorf("the %s target says its CPU is emulated: %v, want %v", tw.Name, vm.Emulated(), tw.Emulated)
	}
	if id, _ := vm.Identity(ctx); id.CPUs != tw.CPUs || id.MemoryBytes > tw.MemoryBytes || id.MemoryBytes < tw.MemoryBytes/2 || !strings.Contains(id.Kernel, tw.Kernel) {
		t.Errorf("the VM has %d CPUs, %d bytes of memory and kernel %q, want %d, about %d and the guest's %s kernel", id.CPUs, id.MemoryBytes, id.Kernel, tw.CPUs, tw.MemoryBytes, tw.Kernel)
	}

	runnerFile, _ := sb.manifest.File("bin/linux-" + runtime.GOARCH + "/sealbench")
	results := filepath.Join(sb.out, "results")
	var ids []*engine.Identity
	for _, tg := range []provision.Target{loc, vm} {
		id, err := tg.Identity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	samples, err := runner.RunEngine(ctx, runner.EngineOptions{
		RunID: run.ID, Ledger: run.Ledger, Targets: ids,
		BundleID: sb.name, Image: sb.img, RunnerSHA256: runnerFile.Digest, StandinSHA256: standin.Digest,
		Cells: names, Samples: 1, Seed: 1, OutDir: results, Log: t.Logf,
	})
	if err != nil {
		t.Fatalf("RunEngine: %v", err)
	}
	step("ran %d samples", len(samples))
	if want := 2 * len(names); len(samples) != want {
		t.Fatalf("%d samples, want %d", len(samples), want)
	}
	for _, s := range samples {
		if why, ok := tw.Ineligible[s.Cell]; ok && s.Target == tw.Name {
			if s.Status != manifests.StatusIneligible || !strings.Contains(s.Reason, why) {
				t.Errorf("%s %s: %s: %s; want ineligible, saying %q", s.Target, s.Cell, s.Status, s.Reason, why)
			}
			continue
		}
		if s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass {
			t.Errorf("%s %s: %s, verifier %s: %s %s", s.Target, s.Cell, s.Status, s.Verifier, s.Reason, s.VerifierDetail)
		}
	}
	inputs, err := report.Load([]string{results})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(inputs, report.Options{Baseline: local.Name})
	if err != nil {
		t.Fatal(err)
	}
	// The same work: every count equal, except FUSE request counts that
	// differ only because the guest's kernel is not the host's (the report
	// explains those: Debian 12's 6.1 has no FUSE passthrough, so READ and
	// WRITE reach the daemon there).
	for _, d := range rep.Differences {
		if d.Why == "" {
			t.Errorf("%s %s differs: local %s, %s %s", d.Cell, d.Count, d.Values[local.Name], tw.Name, d.Values[tw.Name])
		} else {
			t.Logf("%s %s differs, explained: local %s, %s %s (%s)", d.Cell, d.Count, d.Values[local.Name], tw.Name, d.Values[tw.Name], d.Why)
		}
	}
	for _, tp := range inputs[0].Pins.Targets {
		if tp.Name == tw.Name && tp.Emulated != tw.Emulated {
			t.Errorf("the run's pins say %s is emulated: %v, want %v: %+v", tw.Name, tp.Emulated, tw.Emulated, tp)
		}
	}

	tw.holds(ctx, t, run, state, vm, moreImages)
	return loc
}

// holds checks that the VM, up after a run, holds what Holds says (with
// moreImages more images) and that the audit sees it.
func (tw Twelve) holds(ctx context.Context, t *testing.T, run *runs.Run, state string, vm EmulatedTarget, moreImages int) {
	t.Helper()
	want := map[manifests.ResourceKind]int{}
	for k, n := range tw.Holds {
		want[k] = n
	}
	if _, ok := want[manifests.ResourceImage]; ok {
		want[manifests.ResourceImage] += moreImages
	}
	inv, err := vm.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[manifests.ResourceKind]int{}
	for _, r := range inv {
		kinds[r.Kind]++
		t.Logf("holds %s", r)
	}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("inventory by kind %v: want %v", kinds, want)
			break
		}
	}
	res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{tw.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) == 0 {
		t.Error("the audit does not see the running VM")
	}
}

// lifecycle takes the VM, up after a run, through the rest of its life:
// Destroy removes all of it and its directory, a second Destroy is nil,
// and the audit of the target then finds nothing of the run.
func (tw Twelve) lifecycle(ctx context.Context, t *testing.T, run *runs.Run, state string, vm EmulatedTarget) {
	t.Helper()
	if err := vm.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if inv, err := vm.Inventory(ctx); err != nil || len(inv) > 0 {
		t.Errorf("after Destroy: %v %v", inv, err)
	}
	if err := vm.Destroy(ctx); err != nil {
		t.Errorf("Destroy again: %v", err)
	}
	res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{tw.Name}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Leftovers {
		t.Errorf("left after Destroy: %s", r)
	}
	if _, err := os.Stat(tw.Dir(vm)); !os.IsNotExist(err) {
		t.Errorf("the %s target's directory %s is still there: %v", tw.Name, tw.Dir(vm), err)
	}
}
