//go:build limatest

// The lima VM tests boot real Lima VMs under QEMU (TCG): many minutes, so
// they are kept out of the default run. `make test-lima` builds limactl and
// the VM image first, then runs them.

package lima_test

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
	"github.com/sealbench/sealbench/provision/lima"
	"github.com/sealbench/sealbench/provision/local"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/report"
	"github.com/sealbench/sealbench/vmimages"
)

func TestMain(m *testing.M) { provisiontest.Main(m) }

// needLima skips unless this machine can run the lima target: root (the
// stand-in, and limactl as uid 65534), QEMU, limactl and the VM image.
func needLima(t *testing.T) (limactl, vmImage string) {
	t.Helper()
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "qemu-system-x86_64")
	testenv.NeedCommand(t, "ssh")
	limactl, err := lima.FindLimactl("")
	if err != nil {
		testenv.Skip(t, "%v (`make test-lima` builds it)", err)
	}
	vmImage, err = lima.DefaultVMImage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vmimages.LoadVM(vmImage); err != nil {
		testenv.Skip(t, "%v (`make test-lima` builds it)", err)
	}
	return limactl, vmImage
}

func readManifest(t *testing.T, dir string) *manifests.BundleManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, manifests.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifests.ParseBundleManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConformance runs the suite every Target passes, each test on a
// fresh VM.
func TestConformance(t *testing.T) {
	limactl, vmImage := needLima(t)
	b := provisiontest.GetBundle(t)
	m := readManifest(t, b.Dir)
	provisiontest.Run(t, &provisiontest.Suite{
		New: func(t *testing.T, run *provision.Run) provision.Target {
			l, err := lima.New(lima.Options{Run: run, Bundle: b.Dir, Manifest: m, VMImage: vmImage, Limactl: limactl, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Image:   b.Image,
		Engine:  manifests.EngineStandin,
		Timeout: 10 * time.Minute, // boots under TCG took 1 to 3 minutes here
	})
}

// TestTwelveCellsLikeLocal is the whole flow: seal this tree with its
// Sandbox image, provision local and lima from it, run all twelve cells
// on both, and require every verifier to pass with exact counts (FUSE
// requests by opcode, SQLite statements, files and bytes) equal to
// local's; then take the VM through the rest of its life (what it holds,
// the audit seeing it, Destroy twice) and tear the run down, with an
// audit that finds nothing left. It is the one test that boots a VM for
// the lifecycle, beside the conformance suite's two boots.
func TestTwelveCellsLikeLocal(t *testing.T) {
	limactl, vmImage := needLima(t)
	testenv.NeedFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	start := time.Now()
	step := func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

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

	state, err := os.MkdirTemp("", "sbl-") // short: the local stand-in's socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	run, err := provision.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	torn := false
	defer func() {
		if !torn {
			run.Close()
			provision.Teardown(context.Background(), run.Dir, provision.TeardownOptions{Log: t.Logf})
		}
	}()
	standin, ok := verified.Manifest.File(local.StandinBundlePath())
	if !ok {
		t.Fatalf("the bundle has no %s", local.StandinBundlePath())
	}
	loc, err := local.New(local.Options{Run: run, Bundle: sealed.Dir, Standin: standin.Digest, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := lima.New(lima.Options{Run: run, Bundle: sealed.Dir, Manifest: verified.Manifest, VMImage: vmImage, Limactl: limactl, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []provision.Target{loc, vm} {
		if err := target.Create(ctx); err != nil {
			t.Fatalf("creating %s: %v", target.Name(), err)
		}
		step("created %s", target.Name())
		if err := target.InstallImage(ctx, img); err != nil {
			t.Fatalf("installing the image on %s: %v", target.Name(), err)
		}
		id, err := target.Identity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		step("provisioned %s: kernel %s, %d CPUs, %d MiB", target.Name(), id.Kernel, id.CPUs, id.MemoryBytes>>20)
	}
	if !vm.Emulated() {
		t.Error("the lima target does not say it is emulated")
	}
	if id, _ := vm.Identity(ctx); id.CPUs != lima.DefaultCPUs || id.MemoryBytes > lima.DefaultMemoryBytes || id.MemoryBytes < lima.DefaultMemoryBytes/2 || !strings.Contains(id.Kernel, "cloud") {
		t.Errorf("the VM has %d CPUs, %d bytes of memory and kernel %q, want %d, about %d and the guest's cloud kernel", id.CPUs, id.MemoryBytes, id.Kernel, lima.DefaultCPUs, lima.DefaultMemoryBytes)
	}

	runnerFile, _ := verified.Manifest.File("bin/linux-" + runtime.GOARCH + "/sealbench")
	results := filepath.Join(out, "results")
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
		BundleID: sealed.Name, Image: img, RunnerSHA256: runnerFile.Digest, StandinSHA256: standin.Digest,
		Cells: cells.Names(), Samples: 1, Seed: 1, OutDir: results, Log: t.Logf,
	})
	if err != nil {
		t.Fatalf("RunEngine: %v", err)
	}
	step("ran %d samples", len(samples))
	if want := 2 * len(cells.Names()); len(samples) != want {
		t.Fatalf("%d samples, want %d", len(samples), want)
	}
	byTarget := map[string][]manifests.Sample{}
	for _, s := range samples {
		if s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass {
			t.Errorf("%s %s: %s, verifier %s: %s %s", s.Target, s.Cell, s.Status, s.Verifier, s.Reason, s.VerifierDetail)
		}
		byTarget[s.Target] = append(byTarget[s.Target], s)
	}
	inputs, err := report.Load([]string{results})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(inputs, report.Options{Baseline: local.Name})
	if err != nil {
		t.Fatal(err)
	}
	pins := inputs[0].Pins
	// The same work: every count equal, except FUSE request counts that
	// differ only because the guest's kernel is not the host's (the report
	// explains those: Debian 12's 6.1 has no FUSE passthrough, so READ and
	// WRITE reach the daemon there).
	for _, d := range rep.Differences {
		if d.Why == "" {
			t.Errorf("%s %s differs: local %s, lima %s", d.Cell, d.Count, d.Values[local.Name], d.Values[lima.Name])
		} else {
			t.Logf("%s %s differs, explained: local %s, lima %s (%s)", d.Cell, d.Count, d.Values[local.Name], d.Values[lima.Name], d.Why)
		}
	}
	for _, tp := range pins.Targets {
		if tp.Name == lima.Name && !tp.Emulated {
			t.Errorf("the run's pins do not say lima is emulated: %+v", tp)
		}
	}

	vmLifecycle(ctx, t, run, state, vm)
	step("destroyed the VM")

	run.Close()
	torn = true
	res, err := provision.Teardown(ctx, run.Dir, provision.TeardownOptions{Log: t.Logf})
	if err != nil {
		t.Fatalf("teardown: %v", err)
	}
	step("tore down %d resources", len(res.Removed))
	audit, err := provision.Audit(ctx, provision.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{local.Name, lima.Name}})
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
	if _, err := os.Stat(vm.LimaDir()); !os.IsNotExist(err) {
		t.Errorf("the run's Lima directory %s is still there: %v", vm.LimaDir(), err)
	}
}

// vmLifecycle takes the VM, up after a run, through the rest of its life:
// it holds what a Lima VM holds (its directory and instance, hostagent and
// QEMU, the image), the audit sees it while it is up, Destroy removes all
// of it and its Lima directory, a second Destroy is nil, and the audit of
// lima then finds nothing of the run.
func vmLifecycle(ctx context.Context, t *testing.T, run *provision.Run, state string, vm *lima.Lima) {
	t.Helper()
	inv, err := vm.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[manifests.ResourceKind]int{}
	for _, r := range inv {
		kinds[r.Kind]++
		t.Logf("holds %s", r)
	}
	if kinds[manifests.ResourceVM] != 2 || kinds[manifests.ResourceProcess] != 2 || kinds[manifests.ResourceImage] != 1 {
		t.Errorf("inventory by kind %v: want the Lima directory and instance, hostagent and QEMU, and the image", kinds)
	}
	res, err := provision.Audit(ctx, provision.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{lima.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) == 0 {
		t.Error("the audit does not see the running VM")
	}
	if err := vm.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if inv, err := vm.Inventory(ctx); err != nil || len(inv) > 0 {
		t.Errorf("after Destroy: %v %v", inv, err)
	}
	if err := vm.Destroy(ctx); err != nil {
		t.Errorf("Destroy again: %v", err)
	}
	res, err = provision.Audit(ctx, provision.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{lima.Name}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Leftovers {
		t.Errorf("left after Destroy: %s", r)
	}
	if _, err := os.Stat(vm.LimaDir()); !os.IsNotExist(err) {
		t.Errorf("the run's Lima directory is still there: %v", err)
	}
}
