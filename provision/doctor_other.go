//go:build !linux

package provision

// KVMCheck says there is no KVM: it is Linux's. VM targets on other hosts use
// their own hypervisor (Apple's Virtualization framework for apple and
// microsandbox).
func KVMCheck() Check {
	return Check{Name: "kvm", Detail: "KVM is Linux's; this host is not Linux", Fix: "lima on macOS uses Apple's Virtualization framework instead"}
}
