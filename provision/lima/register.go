package lima

import (
	"fmt"

	"github.com/sealbench/sealbench/provision"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "a Lima VM under QEMU (TCG here), running the stand-in", Order: 30, Root: true,
		New: func(o provision.NewOptions) (provision.Target, error) {
			dir, err := DefaultVMImage()
			if err != nil {
				return nil, fmt.Errorf("no VM image for the lima target (run `make lima-tools vm-image` in the sealbench source tree): %w", err)
			}
			return New(Options{Run: o.Run, Bundle: o.Bundle, Manifest: o.Manifest, VMImage: dir,
				CPUs: o.CPUs, MemoryBytes: o.MemoryBytes, Log: o.Log})
		},
		Backend: backend{},
		Needs:   []string{"root", "qemu-system-x86_64", "limactl", "mmdebstrap", "apt-get"},
		Note:    "under QEMU with TCG emulation, never KVM (it hangs on some hosts), so its timings describe the emulator: a pass/fail and exact-counts target; limactl from `make lima-tools`, the disk from `make vm-image`",
	})
}
