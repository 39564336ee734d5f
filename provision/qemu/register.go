package qemu

import (
	"context"
	"fmt"

	"github.com/sealbench/sealbench/provision"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "a QEMU microvm started by sealbench (TCG unless --accel kvm), running the stand-in", Order: 35,
		New: func(o provision.NewOptions) (provision.Target, error) {
			dir, err := DefaultVMImage()
			if err != nil {
				return nil, fmt.Errorf("no VM image for the qemu target (run `make vm-image` in the sealbench source tree): %w", err)
			}
			return New(Options{Run: o.Run, Bundle: o.Bundle, Manifest: o.Manifest, Image: o.Image, VMImage: dir,
				Accel: o.Accel, CPUs: o.CPUs, MemoryBytes: o.MemoryBytes, Log: o.Log})
		},
		Backend: backend{},
		Checks:  doctorChecks,
		Needs:   []string{"qemu-system-x86_64", "qemu-img", "vm image"},
		Note: "a microvm booted from the VM image's kernel, no network device, the stand-in reached over a virtio-serial port; " +
			"TCG emulation unless --accel kvm (never chosen because /dev/kvm opens: on some hosts it opens and guests hang), so by default a pass/fail and exact-counts target",
	})
}

// doctorChecks are what the qemu target needs here: QEMU and qemu-img,
// the VM image; and whether /dev/kvm answers, which the target needs only
// with --accel kvm (and which proves nothing: on some hosts KVM opens and
// guests hang).
func doctorChecks(context.Context) []provision.Check {
	img := provision.Check{Name: "vm image", Fix: "run `make vm-image` in the sealbench source tree"}
	if dir, err := DefaultVMImage(); err != nil {
		img.Detail = err.Error()
	} else {
		img.OK, img.Detail = true, dir
	}
	return []provision.Check{
		provision.CommandCheck("qemu-system-x86_64", []string{"--version"}, "apt-get install qemu-system-x86"),
		provision.CommandCheck("qemu-img", []string{"--version"}, "apt-get install qemu-utils"),
		img,
		provision.KVMCheck(), // what KVM's presence means: nothing, unless --accel kvm
	}
}
