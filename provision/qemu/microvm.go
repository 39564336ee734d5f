package qemu

import (
	"fmt"
	"strconv"
	"strings"
)

// This file is the VM launcher: it turns a machine into QEMU's command
// line, a microvm (no PCI, no firmware, virtio-mmio devices) booting the
// VM image's kernel and initrd directly. Everything else of the target
// (the run directory, the ledger, the bundle disk, the guest link, the
// wait for the stand-in) depends only on machine, so a Firecracker
// launcher (a JSON config with the same kernel, initrd, disks and a vsock
// instead of the serial port) would be one more file beside this one.

// Accelerators QEMU may use. TCG is the default and KVM is only ever the
// user's choice (--accel kvm): on some hosts /dev/kvm opens and answers
// while guests hang, so its presence proves nothing.
const (
	AccelTCG = "tcg"
	AccelKVM = "kvm"
)

// machine is everything the VM's command line depends on.
type machine struct {
	Accel     string // AccelTCG or AccelKVM
	CPUs      int
	MemoryMiB int64
	Kernel    string // the VM image's kernel
	Initrd    string // and initrd
	Cmdline   string // the kernel's command line
	Disk      string // the root disk: a qcow2 overlay of the VM image's disk
	Bundle    string // the bundle disk: a raw tar, read-only
	Serial    string // the unix socket QEMU serves the guest link on
	Console   string // where the guest's serial console is written
	Pidfile   string // QEMU's pid file: also the argument that marks the process as the run's
}

// Guest-side names of the devices.
const (
	// GuestPort is the virtio-serial port's name: udev makes
	// /dev/virtio-ports/<name> of it.
	GuestPort = "sealbench.engine"
	// bundleSerial is the bundle disk's serial (20 bytes at most): udev
	// makes /dev/disk/by-id/virtio-<serial> of it.
	bundleSerial = "sealbench-bundle"
)

// validate reports what makes m unbootable.
func (m machine) validate() error {
	switch {
	case m.Accel != AccelTCG && m.Accel != AccelKVM:
		return fmt.Errorf("qemu target: accelerator %q is not %q or %q", m.Accel, AccelTCG, AccelKVM)
	case m.CPUs < 1:
		return fmt.Errorf("qemu target: %d CPUs", m.CPUs)
	case m.MemoryMiB < 256:
		return fmt.Errorf("qemu target: %d MiB of memory is under the 256 MiB a VM needs", m.MemoryMiB)
	}
	for _, p := range []string{m.Kernel, m.Initrd, m.Disk, m.Bundle, m.Serial, m.Console, m.Pidfile} {
		if p == "" || strings.Contains(p, ",") {
			return fmt.Errorf("qemu target: path %q is empty or has a comma, which QEMU's options cannot carry", p)
		}
	}
	return nil
}

// args is QEMU's command line after the binary: a microvm with no
// default devices, no user config, no display and no network device; the
// CPU model "max" under TCG ("host" under KVM); the root disk and the
// bundle disk (read-only) on virtio-mmio; the guest link on a
// virtio-serial port joined to a unix socket QEMU listens on; the serial
// console to a file; and QEMU's seccomp sandbox on, refusing it new
// processes, new privileges and obsolete system calls.
// TCGCPUModel is the CPU model a VM gets under TCG (lima's too).
const TCGCPUModel = "qemu64"

func (m machine) args() []string {
	// Under TCG, qemu64 (x86-64's baseline, all Debian asks for): a
	// fork-heavy cell (C04, 1,100 processes) took 33.1 s on it against
	// 41.7 s on "max", whose every extension QEMU emulates instruction by
	// instruction.
	cpu := TCGCPUModel
	if m.Accel == AccelKVM {
		cpu = "host"
	}
	return []string{
		"-M", "microvm,rtc=on,pit=on,pic=on",
		"-accel", m.Accel,
		"-cpu", cpu,
		"-smp", strconv.Itoa(m.CPUs),
		"-m", strconv.FormatInt(m.MemoryMiB, 10),
		"-nodefaults", "-no-user-config", "-display", "none",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", m.Kernel,
		"-initrd", m.Initrd,
		"-append", m.Cmdline,
		"-drive", "id=root,file=" + m.Disk + ",format=qcow2,if=none,discard=unmap",
		"-device", "virtio-blk-device,drive=root",
		"-drive", "id=bundle,file=" + m.Bundle + ",format=raw,if=none,readonly=on",
		"-device", "virtio-blk-device,drive=bundle,serial=" + bundleSerial,
		"-device", "virtio-serial-device",
		"-chardev", "socket,id=link,path=" + m.Serial + ",server=on,wait=off",
		"-device", "virtserialport,chardev=link,name=" + GuestPort,
		"-serial", "file:" + m.Console,
		"-pidfile", m.Pidfile,
	}
}
