//go:build qemutest

// The qemu VM tests boot real QEMU microvms under TCG: minutes, so they
// are kept out of the default run. `make test-qemu` (and test-lima, which
// CI runs) builds the VM image first, then runs them.

package qemu_test

import (
	"testing"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/provision/internal/vmtest"
	"github.com/sealbench/sealbench/provision/qemu"
	"github.com/sealbench/sealbench/runs"
)

// needQEMU skips unless this machine can run the qemu target: QEMU,
// qemu-img and the VM image (root only for the conformance suite's
// local checks, which the suite makes itself).
func needQEMU(t *testing.T) string {
	t.Helper()
	testenv.NeedCommand(t, "qemu-system-x86_64")
	testenv.NeedCommand(t, "qemu-img")
	return vmtest.NeedVMImage(t, "make vm-image")
}

// newQEMU is the target of run for the bundle at dir.
func newQEMU(t *testing.T, run *runs.Run, vmImage, dir string, m *manifests.BundleManifest, img engine.Image) *qemu.QEMU {
	t.Helper()
	q, err := qemu.New(qemu.Options{Run: run, Bundle: dir, Manifest: m, Image: img, VMImage: vmImage,
		LinkCommand: []string{vmtest.Self(t), qemu.LinkSubcommand}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestConformance runs the suite every Target passes (provisiontest) on a
// VM made from this tree's sealed bundle, with, while its first boot is
// up, the cells of SEALBENCH_QEMU_CELLS on local and qemu ("all": every
// cell; unset: C01 and C09, the check, as CI runs it: lima's test
// runs the others on the same guest kernel), the same counts
// (vmtest.Twelve.Conformance); then nothing left.
func TestConformance(t *testing.T) {
	vmImage := needQEMU(t)
	vmtest.Twelve{Name: qemu.Name, Emulated: true, CPUs: vmtarget.DefaultSize.CPUs, MemoryBytes: vmtarget.DefaultSize.MemoryBytes, Kernel: "cloud",
		// The target's directory, the VM (disks, pid file), QEMU and the
		// link, their two sockets, the image.
		Holds: map[manifests.ResourceKind]int{manifests.ResourceDir: 1, manifests.ResourceVM: 1, manifests.ResourceProcess: 2,
			manifests.ResourceSocket: 2, manifests.ResourceImage: 1},
		New: func(t *testing.T, run *runs.Run, dir string, m *manifests.BundleManifest, img engine.Image) vmtest.EmulatedTarget {
			return newQEMU(t, run, vmImage, dir, m, img)
		},
		Dir:   func(vm vmtest.EmulatedTarget) string { return vm.(*qemu.QEMU).Dir() },
		Cells: vmtest.CellsFromEnv(t, "SEALBENCH_QEMU_CELLS", []string{"C01", "C09"}),
	}.Conformance(t, manifests.EngineStandin, 10*time.Minute)
}
