package vmtarget

import (
	"cmp"
	"time"
)

// Size is how large a VM booted from the VM image is, and how long the
// stand-in in it may take to answer: lima.Options and qemu.Options embed
// it.
type Size struct {
	// CPUs, MemoryBytes and DiskBytes size the VM (DefaultSize's when
	// zero).
	CPUs        int
	MemoryBytes int64
	DiskBytes   int64
	// ReadyTimeout bounds the boot until the stand-in answers
	// (DefaultSize's when zero).
	ReadyTimeout time.Duration
}

// DefaultSize is what FillDefaults takes: a small VM, as it runs under
// emulation on hosts without usable KVM, and ten minutes for its stand-in
// to answer (a boot under TCG takes half a minute to a minute on an idle
// host).
var DefaultSize = Size{CPUs: 2, MemoryBytes: 2 << 30, DiskBytes: 8 << 30, ReadyTimeout: 10 * time.Minute}

// FillDefaults takes DefaultSize's value for each field s leaves zero.
func (s *Size) FillDefaults() {
	s.CPUs = cmp.Or(s.CPUs, DefaultSize.CPUs)
	s.MemoryBytes = cmp.Or(s.MemoryBytes, DefaultSize.MemoryBytes)
	s.DiskBytes = cmp.Or(s.DiskBytes, DefaultSize.DiskBytes)
	s.ReadyTimeout = cmp.Or(s.ReadyTimeout, DefaultSize.ReadyTimeout)
}
