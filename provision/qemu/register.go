package qemu

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/vmimages"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "a QEMU microvm started by sealbench (TCG unless --accel kvm), running the stand-in", Order: 35,
		New: func(o provision.NewOptions) (provision.Target, error) {
			dir, err := vmimages.DefaultVM()
			if err != nil {
				return nil, fmt.Errorf("no VM image for the qemu target (run `make vm-image` in the sealbench source tree): %w", err)
			}
			vm := provision.OptionsOf[vmtarget.Flags](o.Options)
			return New(Options{Run: o.Run, Bundle: o.Bundle, Manifest: o.Manifest, Image: o.Image, VMImage: dir,
				Accel: provision.OptionsOf[Flags](o.Options).Accel, Size: vmtarget.Size{CPUs: vm.CPUs, MemoryBytes: vm.MemoryBytes()}, Log: o.Log})
		},
		Options:     []func() provision.Options{vmtarget.NewFlags, func() provision.Options { return &Flags{} }},
		Subcommands: []provision.Subcommand{linkSubcommand},
		Help: `No Lima: the VM image of make vm-image booted directly, no network
device, the bundle on a read-only disk and checked in the guest, the
stand-in reached over a virtio-serial port (each Engine connection a
stream). TCG unless --accel kvm (never chosen for you: on some hosts
/dev/kvm opens and guests hang); emulated under TCG.`,
		Examples: []string{
			"  sudo sealbench run --target local,qemu --cells C01,C09",
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
	if dir, err := vmimages.DefaultVM(); err != nil {
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

// Flags are the qemu target's own option: --accel, its accelerator. Run
// and provision take it.
type Flags struct{ Accel string }

var _ provision.Options = (*Flags)(nil)

func (f *Flags) Kind() string { return Name }

func (f *Flags) Flags(fs *pflag.FlagSet, c provision.Command) {
	if c.MakesTargets() {
		fs.StringVar(&f.Accel, "accel", AccelTCG, "the qemu target's accelerator: tcg (software emulation, the default) or kvm; never chosen for you, because on some hosts /dev/kvm opens and guests hang")
	}
}

func (f *Flags) Check() error {
	if f.Accel != "" && f.Accel != AccelTCG && f.Accel != AccelKVM {
		return &provision.UsageError{Err: fmt.Errorf("--accel %q is neither", f.Accel), Hint: "--accel takes tcg or kvm"}
	}
	return nil
}

// linkSubcommand is the qemu target's link: a background process of the
// run (recorded in its ledger before it starts) that serves the Engine
// socket on the host and carries each connection to the stand-in in the
// VM as a stream over its virtio-serial port.
var linkSubcommand = provision.Subcommand{
	Name: LinkSubcommand, Usage: "--socket S --serial P",
	Short: "Serve the qemu target's Engine socket over the VM's serial port (started by provision)",
	Run: func(ctx context.Context, args []string, logf func(string, ...any)) error {
		cfg, err := ParseLinkArgs(args)
		if err != nil {
			return &provision.UsageError{Err: err, Hint: "this command is started by `sealbench provision qemu`"}
		}
		return ServeLink(ctx, cfg, logf)
	},
}
