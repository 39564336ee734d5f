package provision

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// KVMCheck opens /dev/kvm and asks its API version (KVM_GET_API_VERSION), the
// most that can be asked without creating a VM.
func KVMCheck() Check {
	c := Check{Name: "kvm", Fix: "enable virtualization (or nested virtualization) for this machine and load kvm_intel or kvm_amd; without KVM, QEMU emulates (slow, timings not comparable)"}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer f.Close()
	const kvmGetAPIVersion = 0xAE00
	v, err := unix.IoctlRetInt(int(f.Fd()), kvmGetAPIVersion)
	if err != nil {
		c.Detail = fmt.Sprintf("/dev/kvm opens but KVM_GET_API_VERSION fails: %v", err)
		return c
	}
	return Check{Name: "kvm", OK: true, Detail: fmt.Sprintf("/dev/kvm opens and answers (API version %d); no VM was started to test it, and on some hosts KVM opens but hangs: lima always uses TCG emulation, and qemu does unless given --accel kvm", v)}
}
