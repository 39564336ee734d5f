// Package qemu provisions the qemu target: a QEMU microvm that sealbench
// starts itself (no Lima, no libvirt), under TCG software emulation unless
// the user passes --accel kvm, booted straight from the kernel and initrd
// of the VM image `make vm-image` builds, with the Engine API stand-in
// inside reached over a virtio-serial port. The runner drives it exactly
// as it drives the local target: through a unix socket on the host.
//
// # The pieces
//
//   - microvm.go builds QEMU's command line from a machine: the only file
//     that knows QEMU's options (a Firecracker target is one more such file).
//   - guest.go makes the bundle disk (a raw tar: setup.sh, then the
//     bundle's files read through a verifying reader) and the kernel
//     command line that runs setup.sh at boot; the guest installs and
//     checks the bundle exactly as lima's does, then starts the stand-in
//     and its end of the link (`standin mux`).
//   - link.go is the host's end of the link (`sealbench qemu-link`, a
//     process of the run): the Engine socket, each connection a yamux
//     stream over the serial port.
//   - backend.go takes the VM down for teardown and the audit.
//
// # Where things live
//
// Everything is in the run directory, <run>/qemu:
//
//	sock/engine.sock  the Engine endpoint, served by the link process
//	sock/serial.sock  QEMU's end of the serial port, which the link connects to
//	vm/disk.qcow2     the root disk: a qcow2 overlay backed by the image cache's disk
//	vm/bundle.tar     the bundle disk (read-only to the guest)
//	vm/qemu.pid       QEMU's pid file (its argument marks the process as the run's)
//	console.log       the guest's serial console (kernel, systemd, setup.sh, the stand-in)
//	logs/             QEMU's and the link's own output
//
// Every one of them is in the ledger before it is made; teardown kills
// the link and QEMU (each found by its command line), then removes the
// rest; the audit finds them through the ledger and, without one, by the
// paths under the state directory in their command lines.
package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/vmimages"
)

// Name is the target's name.
const Name = "qemu"

var _ provision.Target = (*QEMU)(nil)

var (
	ErrQEMUMissing = errors.New("qemu-system-x86_64 not found")
	ErrQEMUTooOld  = errors.New("QEMU is too old")
	// spec is QEMU as the target drives it: microvm with virtio-serial on
	// virtio-mmio, checked with Debian 12's 7.2.
	spec = toolexec.Spec{Default: "qemu-system-" + qemuArch(), Min: toolexec.Version{7, 2, 0},
		MinWhy: "for microvm's virtio-mmio devices as tested", Checked: "QEMU 7.2 (Debian 12)",
		Install: "apt-get install qemu-system-x86 qemu-utils", Upgrade: "apt-get install qemu-system-x86",
		ErrMissing: ErrQEMUMissing, ErrTooOld: ErrQEMUTooOld, ErrUntested: ErrQEMUTooOld}
)

// qemuArch is QEMU's name of this host's architecture.
func qemuArch() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}

// Options configures the qemu target.
type Options struct {
	Run *runs.Run
	// Bundle is a verified bundle directory and Manifest its verified
	// manifest: every file the guest gets is checked against it.
	Bundle   string
	Manifest *manifests.BundleManifest
	// Image is the Sandbox image, loaded into the stand-in by InstallImage.
	Image engine.Image
	// VMImage is the directory `make vm-image` wrote (vm-image.json beside
	// disk.qcow2, vmlinuz and initrd.img).
	VMImage string
	// Accel is AccelTCG (default) or AccelKVM.
	Accel string
	// Size sizes the VM and bounds its boot.
	vmtarget.Size
	// QEMU is the QEMU binary (default qemu-system-x86_64 on PATH).
	QEMU string
	// LinkCommand starts the link: an absolute binary and the arguments
	// before LinkConfig.Args (default: this executable and LinkSubcommand).
	LinkCommand []string
	Log         func(format string, args ...any)
}

// QEMU is a QEMU microvm with the stand-in inside.
type QEMU struct {
	o    Options
	vm   *vmtarget.VM
	link []string
	// Paths in the target's directory (see the package doc).
	vmDir, disk, bundleTar, pidfile, serial, console string
	// exited are closed when QEMU and the link this process started exit.
	qemuExited, linkExited chan struct{}
}

// New returns the qemu target of o.Run. It creates nothing.
func New(o Options) (*QEMU, error) {
	if o.Manifest == nil || o.Bundle == "" {
		return nil, errors.New("qemu target: no verified bundle and manifest")
	}
	if o.VMImage == "" {
		return nil, errors.New("qemu target: no VM image directory (build one with `make vm-image`)")
	}
	if o.Accel == "" {
		o.Accel = AccelTCG
	}
	if o.Accel != AccelTCG && o.Accel != AccelKVM {
		return nil, fmt.Errorf("qemu target: --accel %q: want %s or %s", o.Accel, AccelTCG, AccelKVM)
	}
	o.Size.FillDefaults()
	link, err := vmtarget.HelperCommand(Name, "link", o.LinkCommand, LinkSubcommand)
	if err != nil {
		return nil, err
	}
	vm, err := vmtarget.New(vmtarget.Config{Target: Name, What: "the QEMU VM", Spec: spec, Options: vmtarget.Options{
		Run: o.Run, Image: o.Image, Tool: o.QEMU, CPUs: o.CPUs, MemoryBytes: o.MemoryBytes,
		ReadyTimeout: o.ReadyTimeout, Log: o.Log}})
	if err != nil {
		return nil, err
	}
	o.Log = vm.C.Log
	q := &QEMU{o: o, vm: vm, link: link, vmDir: filepath.Join(vm.Dir, "vm"),
		serial: filepath.Join(filepath.Dir(vm.Sock), "serial.sock"), console: filepath.Join(vm.Dir, "console.log")}
	q.disk, q.bundleTar, q.pidfile = filepath.Join(q.vmDir, "disk.qcow2"), filepath.Join(q.vmDir, "bundle.tar"), filepath.Join(q.vmDir, "qemu.pid")
	return q, nil
}

func (q *QEMU) Name() string     { return Name }
func (q *QEMU) Endpoint() string { return q.vm.Endpoint() }

// Emulated reports whether the VM's CPU is emulated: under TCG, always.
func (q *QEMU) Emulated() bool { return q.o.Accel == AccelTCG }

// Dir is the target's directory in the run.
func (q *QEMU) Dir() string { return q.vm.Dir }

// qemuRunning reports whether the run's QEMU runs.
func (q *QEMU) qemuRunning() bool {
	return q.vm.Tool != nil && len(runs.FindProcs(runs.MarkedBy(q.vm.Tool.Path, q.pidfile))) > 0
}

// linkRunning reports whether the run's link process runs.
func (q *QEMU) linkRunning() bool {
	return len(runs.FindProcs(runs.MarkedBy(q.link[0], q.vm.Sock))) > 0
}

// Create boots the VM and waits for the stand-in in it to answer; when
// it answers already, it does nothing.
func (q *QEMU) Create(ctx context.Context) error {
	if err := q.vm.ResolveTool(); err != nil {
		return err
	}
	if q.qemuRunning() && q.linkRunning() && engine.Ping(ctx, q.Endpoint(), 10*time.Second) == nil {
		return nil
	}
	start := time.Now()
	if _, err := q.vm.CheckVersion(ctx); err != nil {
		return err
	}
	if err := q.vm.MakeDirs(); err != nil {
		return err
	}
	img, err := vmimages.LoadVerifiedVM(q.o.VMImage, q.o.Log)
	if err != nil {
		return err
	}
	if err := q.vm.Record(manifests.LedgerEntry{Kind: manifests.ResourceVM, Key: q.vmDir, Exe: q.vm.Tool.Path,
		Detail: fmt.Sprintf("the QEMU microvm (%s, %d vCPU, %d MiB): its disk overlay, bundle disk and pid file", q.o.Accel, q.o.CPUs, q.o.MemoryBytes>>20)}); err != nil {
		return err
	}
	if q.qemuRunning() || q.linkRunning() {
		// Left by an earlier Create that failed half-way: start afresh.
		q.o.Log("stopping the half-made VM in %s", q.vmDir)
		if err := q.Destroy(ctx); err != nil {
			return err
		}
		return q.Create(ctx)
	}
	if err := os.RemoveAll(q.vmDir); err != nil {
		return err
	}
	if err := os.MkdirAll(q.vmDir, 0o700); err != nil {
		return err
	}
	if err := q.makeDisks(ctx, img); err != nil {
		return err
	}
	tsc := int64(0)
	if q.o.Accel == AccelTCG {
		tsc = hostTSCkHz()
	}
	m := machine{Accel: q.o.Accel, CPUs: q.o.CPUs, MemoryMiB: q.o.MemoryBytes >> 20,
		Kernel: img.Path(vmimages.VMKernel), Initrd: img.Path(vmimages.VMInitrd), Cmdline: kernelCmdline(img.Cmdline, tsc),
		Disk: q.disk, Bundle: q.bundleTar, Serial: q.serial, Console: q.console, Pidfile: q.pidfile}
	if err := m.validate(); err != nil {
		return err
	}
	for _, e := range []manifests.LedgerEntry{
		{Kind: manifests.ResourceProcess, Key: q.pidfile, Exe: q.vm.Tool.Path, Detail: "QEMU (" + q.o.Accel + ")"},
		{Kind: manifests.ResourceSocket, Key: q.serial, Detail: "QEMU's end of the guest link (virtio-serial)"},
	} {
		if err := q.vm.Record(e); err != nil {
			return err
		}
	}
	if err := os.Remove(q.serial); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %w", q.serial, err)
	}
	q.o.Log("booting the VM (%s; about half a minute under TCG); its console goes to %s", q.o.Accel, q.console)
	if q.qemuExited, err = q.start(append([]string{q.vm.Tool.Path}, m.args()...), "qemu.log"); err != nil {
		return err
	}
	for _, e := range []manifests.LedgerEntry{
		{Kind: manifests.ResourceSocket, Key: q.vm.Sock, Detail: "the Engine socket, served by the link"},
		{Kind: manifests.ResourceProcess, Key: q.vm.Sock, Exe: q.link[0], Detail: "the link: Engine connections over the serial port"},
	} {
		if err := q.vm.Record(e); err != nil {
			return err
		}
	}
	lc := LinkConfig{Socket: q.vm.Sock, Serial: q.serial}
	if q.linkExited, err = q.start(append(append([]string(nil), q.link...), lc.Args()...), "link.log"); err != nil {
		return err
	}
	if err := q.vm.WaitReady(ctx, 5*time.Second, q.alive, q.logs); err != nil {
		return err
	}
	q.o.Log("the stand-in in the VM answers on %s (%s after start)", q.Endpoint(), time.Since(start).Round(time.Second))
	return nil
}

// makeDisks makes the root disk, a qcow2 overlay (DiskBytes large; the
// guest grows its filesystem) backed by the image cache's verified disk,
// and the bundle disk.
func (q *QEMU) makeDisks(ctx context.Context, img *vmimages.VMImage) error {
	qimg := filepath.Join(filepath.Dir(q.vm.Tool.Path), "qemu-img")
	if _, err := os.Stat(qimg); err != nil {
		if qimg, err = exec.LookPath("qemu-img"); err != nil {
			return fmt.Errorf("the qemu target needs qemu-img (Debian package qemu-utils): %w", err)
		}
	}
	t := &toolexec.Tool{Path: qimg, LogDir: q.vm.Logs, Log: q.o.Log}
	if _, err := t.Run(ctx, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img.Path(vmimages.VMDisk), q.disk, fmt.Sprint(q.o.DiskBytes)); err != nil {
		return fmt.Errorf("making the disk overlay: %w", err)
	}
	return writeBundleDisk(q.bundleTar, q.o.Bundle, filepath.Base(filepath.Clean(q.o.Bundle)), q.o.Manifest)
}

// start starts argv in the background (vmtarget.StartBackground), its
// output in the log directory's file log; the channel closes when it
// exits.
func (q *QEMU) start(argv []string, log string) (chan struct{}, error) {
	if err := os.MkdirAll(q.vm.Logs, 0o700); err != nil {
		return nil, err
	}
	return vmtarget.StartBackground(argv, q.vm.Dir, filepath.Join(q.vm.Logs, log))
}

// alive is nil while QEMU and the link run.
func (q *QEMU) alive(context.Context) error {
	for _, p := range []struct {
		what, log string
		exited    chan struct{}
		running   func() bool
	}{{"QEMU", "qemu.log", q.qemuExited, q.qemuRunning}, {"the link", "link.log", q.linkExited, q.linkRunning}} {
		if !vmtarget.Running(p.exited, p.running) {
			return fmt.Errorf("%s exited; its log, %s:\n%s\nthe console's end:\n%s", p.what, filepath.Join(q.vm.Logs, p.log),
				vmtarget.Tail(filepath.Join(q.vm.Logs, p.log), 2000), vmtarget.Tail(q.console, 3000))
		}
	}
	return nil
}

// logs is the console's end, for an error.
func (q *QEMU) logs(context.Context) string {
	return fmt.Sprintf("the console's end, %s:\n%s", q.console, vmtarget.Tail(q.console, 3000))
}

// InstallImage loads img into the stand-in in the VM.
func (q *QEMU) InstallImage(ctx context.Context, img engine.Image) error {
	return q.vm.InstallImage(ctx, img)
}

// Identity asks the stand-in in the VM: the guest's kernel, vCPUs and
// memory; under TCG its CPU is emulated.
func (q *QEMU) Identity(ctx context.Context) (*engine.Identity, error) {
	id, err := q.vm.Identity(ctx)
	if err != nil {
		return nil, err
	}
	id.Emulated = q.Emulated()
	return id, nil
}

// Destroy tears down every ledger entry of the target: the Engine's
// containers and images (inside the VM), the link, QEMU, the sockets, the
// VM's disks and the target's directory.
func (q *QEMU) Destroy(ctx context.Context) error { return q.vm.Destroy(ctx, nil) }

// Inventory lists what of the run the target holds.
func (q *QEMU) Inventory(ctx context.Context) ([]runs.Resource, error) {
	return q.vm.Inventory(ctx, nil)
}
