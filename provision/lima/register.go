package lima

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sealbench/sealbench/internal/toolcache"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/vmimages"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "a Lima VM under QEMU (TCG here), running the stand-in", Order: 30, Root: true,
		New: func(o provision.NewOptions) (provision.Target, error) {
			dir, err := vmimages.DefaultVM()
			if err != nil {
				return nil, fmt.Errorf("no VM image for the lima target (run `make lima-tools vm-image` in the sealbench source tree): %w", err)
			}
			vm := provision.OptionsOf[vmtarget.Flags](o.Options)
			return New(Options{Run: o.Run, Bundle: o.Bundle, Manifest: o.Manifest, VMImage: dir,
				Size: vmtarget.Size{CPUs: vm.CPUs, MemoryBytes: vm.MemoryBytes()}, Log: o.Log})
		},
		Options: []func() provision.Options{vmtarget.NewFlags},
		Help: `limactl v1.2.1 (make lima-tools) run as uid 65534, under QEMU with TCG,
never KVM, booted from the VM image of make vm-image; the bundle copied in
and checked, the stand-in inside reached through Lima's socket forwarding.
Emulated: its timings are the emulator's. Needs root.`,
		Examples: []string{
			"  # A Lima VM under QEMU (TCG): the same cells, exact counts compared with local's:\n  sudo sealbench run --target local,lima --cells C01,C09",
		},
		Backend: backend{},
		Checks:  doctorChecks,
		Needs:   []string{"root", "qemu-system-x86_64", "limactl", "mmdebstrap", "apt-get"},
		Note:    "under QEMU with TCG emulation, never KVM (it hangs on some hosts), so its timings describe the emulator: a pass/fail and exact-counts target; limactl from `make lima-tools`, the disk from `make vm-image`",
	})
}

// doctorChecks are what the lima target needs of this host: QEMU (and
// whether KVM is there, which it never uses), limactl where `make
// lima-tools` puts it, mmdebstrap and apt for the VM disk.
func doctorChecks(context.Context) []provision.Check {
	limactl := provision.Check{Name: "limactl", Fix: "run `make lima-tools` in the sealbench source tree: it builds limactl " + toolcache.LimaVersion +
		" and its guest agent into " + filepath.Dir(filepath.Dir(toolcache.Limactl())) + ", where sealbench finds them"}
	if p, err := FindLimactl(""); err != nil {
		limactl.Detail = err.Error()
	} else {
		c := provision.CommandCheck(p, []string{"--version"}, limactl.Fix)
		c.Name = limactl.Name
		limactl = c
	}
	return []provision.Check{
		provision.CommandCheck("qemu-system-x86_64", []string{"--version"}, "apt-get install qemu-system-x86"),
		provision.KVMCheck(),
		limactl,
		provision.CommandCheck("mmdebstrap", []string{"--version"}, "apt-get install mmdebstrap"),
		provision.CommandCheck("apt-get", []string{"--version"}, "use a Debian or Ubuntu host: the images are built from pinned Debian packages fetched through apt"),
	}
}
