//go:build limatest

// The lima VM tests boot real Lima VMs under QEMU (TCG): many minutes, so
// they are kept out of the default run. `make test-lima` builds limactl and
// the VM image first, then runs them.

package lima_test

import (
	"testing"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/provision/internal/vmtest"
	"github.com/sealbench/sealbench/provision/lima"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
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
	return limactl, vmtest.NeedVMImage(t, "make test-lima")
}

// TestConformance runs the suite every Target passes (two boots: see
// provisiontest) on a VM made from this tree's sealed bundle, with, while
// the first boot is up, the cells of SEALBENCH_LIMA_CELLS on local and
// lima, the same counts (vmtest.Twelve.Conformance); then nothing left.
// Unset, that is limaCells: all twelve but two whose every request
// another of them makes too; "all" is all twelve.
func TestConformance(t *testing.T) {
	limactl, vmImage := needLima(t)
	vmtest.Twelve{Name: lima.Name, Emulated: true, CPUs: vmtarget.DefaultSize.CPUs, MemoryBytes: vmtarget.DefaultSize.MemoryBytes, Kernel: "cloud",
		// The Lima directory and instance, hostagent and QEMU, the image.
		Holds: map[manifests.ResourceKind]int{manifests.ResourceVM: 2, manifests.ResourceProcess: 2, manifests.ResourceImage: 1},
		New: func(t *testing.T, run *runs.Run, dir string, m *manifests.BundleManifest, _ engine.Image) vmtest.EmulatedTarget {
			vm, err := lima.New(lima.Options{Run: run, Bundle: dir, Manifest: m, VMImage: vmImage, Limactl: limactl, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			return vm
		},
		Dir:   func(vm vmtest.EmulatedTarget) string { return vm.(*lima.Lima).LimaDir() },
		Cells: vmtest.CellsFromEnv(t, "SEALBENCH_LIMA_CELLS", limaCells),
	}.Conformance(t, manifests.EngineStandin, 10*time.Minute) // boots under TCG took 1 to 3 minutes here
}

// limaCells are the cells CI runs on lima: not C02, which is C01 with a
// stat process per file, nor C04, which is C05 without its find (the same
// script up to it). Each starts 1,000 processes or more, about a minute
// apiece under TCG, twice with the cache protocol's warm-up run: 3 to 4
// of the suite's 13 minutes. Both run on local, docker, gvisor and
// kubernetes in every CI run, and what they ask of the guest's kernel
// and LayerFS, C01 and C05 ask too.
var limaCells = []string{"C01", "C03", "C05", "C06", "C07", "C08", "C09", "C10", "C11", "C12"}
