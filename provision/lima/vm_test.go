//go:build limatest

// The lima VM tests boot real Lima VMs under QEMU (TCG): many minutes, so
// they are kept out of the default run. `make test-lima` builds limactl and
// the VM image first, then runs them.

package lima_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtest"
	"github.com/sealbench/sealbench/provision/lima"
	"github.com/sealbench/sealbench/provision/provisiontest"
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

// TestLifecycle takes one VM through everything a run does with it, with
// room for TCG's slow boot: Create (twice: the second changes nothing),
// InstallImage, a Sandbox, Identity, Destroy, and an audit that finds
// nothing of the run on the host.
func TestLifecycle(t *testing.T) {
	limactl, vmImage := needLima(t)
	b := provisiontest.GetBundle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	state, err := os.MkdirTemp("", "sbl-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	run, err := provision.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	defer provision.Teardown(context.Background(), run.Dir, provision.TeardownOptions{})
	vm, err := lima.New(lima.Options{Run: run, Bundle: b.Dir, Manifest: readManifest(t, b.Dir), VMImage: vmImage, Limactl: limactl, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := vm.Create(ctx); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("created in %s", time.Since(start).Round(time.Second))
	entries := len(run.Ledger.Entries())
	if err := vm.Create(ctx); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	if n := len(run.Ledger.Entries()); n != entries {
		t.Errorf("the second Create recorded %d more ledger entries", n-entries)
	}
	if err := vm.InstallImage(ctx, b.Image); err != nil {
		t.Fatalf("InstallImage: %v", err)
	}
	id, err := vm.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("identity %+v, emulated %v", id, vm.Emulated())
	if id.CPUs != lima.DefaultCPUs || !strings.Contains(id.Kernel, "cloud") || !vm.Emulated() {
		t.Errorf("identity %+v, emulated %v: want %d CPUs, the guest's cloud kernel, emulated", id, vm.Emulated(), lima.DefaultCPUs)
	}
	cli, err := engine.NewClient(vm.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cid, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: lima.Name, Endpoint: vm.Endpoint(), Image: b.Image.ID, Name: "probe", Cmd: []string{"sh", "-c", "sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, cid, container.StartOptions{}); err != nil {
		// Not fatal: Destroy and the audit below must work either way.
		t.Errorf("starting a Sandbox in the VM: %v", err)
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
	if kinds[manifests.ResourceVM] != 2 || kinds[manifests.ResourceProcess] != 2 || kinds[manifests.ResourceContainer] != 1 || kinds[manifests.ResourceImage] != 1 {
		t.Errorf("inventory by kind %v: want the Lima directory and instance, hostagent and QEMU, the Sandbox and the image", kinds)
	}
	// The audit sees the live VM (it is a run's, whichever).
	res, err := provision.Audit(ctx, provision.AuditOptions{StateDir: state, Run: run.ID, Targets: []string{lima.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) == 0 {
		t.Error("the audit does not see the running VM")
	}
	start = time.Now()
	if err := vm.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	t.Logf("destroyed in %s", time.Since(start).Round(time.Second))
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

// TestTwelveCellsLikeLocal: every cell on local and lima, the same counts
// (vmtest.Twelve), then nothing left.
func TestTwelveCellsLikeLocal(t *testing.T) {
	limactl, vmImage := needLima(t)
	vmtest.Twelve{Name: lima.Name, CPUs: lima.DefaultCPUs, MemoryBytes: lima.DefaultMemoryBytes,
		New: func(t *testing.T, run *provision.Run, dir string, m *manifests.BundleManifest, _ engine.Image) vmtest.EmulatedTarget {
			vm, err := lima.New(lima.Options{Run: run, Bundle: dir, Manifest: m, VMImage: vmImage, Limactl: limactl, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return vm
		},
		Dir: func(vm vmtest.EmulatedTarget) string { return vm.(*lima.Lima).LimaDir() },
	}.TwelveCellsLikeLocal(t)
}
