package vmtarget

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/provision"
)

// Flags are the VM targets' shared options (lima, qemu, apple,
// microsandbox): --vm-cpus and --vm-memory size the VM, zero meaning each
// provisioner's default, and --allow-untested-tool lets a target drive
// its tool where it is newer than the releases it was checked against.
// Run and provision take them.
type Flags struct {
	CPUs              int
	MemoryMiB         int64
	AllowUntestedTool bool
}

var _ provision.Options = (*Flags)(nil)

// FlagsKind is Flags' kind.
const FlagsKind = "vm"

// Bounds of the VM flags: zero is the provisioner's default; anything
// else must be a size a VM can have.
const (
	maxVMCPUs      = 1024
	minVMMemoryMiB = 256
	maxVMMemoryMiB = 16 << 20 // 16 TiB
)

// NewFlags is the Registration.Options of every VM target.
func NewFlags() provision.Options { return &Flags{} }

func (f *Flags) Kind() string { return FlagsKind }

func (f *Flags) Flags(fs *pflag.FlagSet, c provision.Command) {
	if !c.MakesTargets() {
		return
	}
	fs.IntVar(&f.CPUs, "vm-cpus", 0, fmt.Sprintf("CPUs of a VM target, 1 to %d (default: the provisioner's: 2 for lima and qemu, 4 for apple and microsandbox)", maxVMCPUs))
	fs.Int64Var(&f.MemoryMiB, "vm-memory", 0, fmt.Sprintf("memory of a VM target in MiB, %d to %d (default: the provisioner's: 2048 for lima and qemu, 4096 for apple and microsandbox)", minVMMemoryMiB, maxVMMemoryMiB))
	var tools []string
	for _, r := range provision.Registered() {
		if r.Tools != "" {
			tools = append(tools, r.Name+": "+r.Tools)
		}
	}
	fs.BoolVar(&f.AllowUntestedTool, strings.TrimPrefix(toolexec.AllowUntestedFlag, "--"), false, "drive a VM target's tool even when it is newer than the releases sealbench was checked against ("+
		strings.Join(tools, "; ")+"), with a warning naming them; without it a newer tool is refused")
}

// Check refuses VM sizes no VM can have, before anything is made.
func (f *Flags) Check() error {
	if f.CPUs < 0 || f.CPUs > maxVMCPUs {
		return &provision.UsageError{Err: fmt.Errorf("--vm-cpus %d is out of range", f.CPUs), Hint: fmt.Sprintf("--vm-cpus takes 1 to %d (0: the provisioner's default)", maxVMCPUs)}
	}
	if f.MemoryMiB != 0 && (f.MemoryMiB < minVMMemoryMiB || f.MemoryMiB > maxVMMemoryMiB) {
		return &provision.UsageError{Err: fmt.Errorf("--vm-memory %d is out of range", f.MemoryMiB),
			Hint: fmt.Sprintf("--vm-memory takes MiB, %d to %d (0: the provisioner's default)", minVMMemoryMiB, maxVMMemoryMiB)}
	}
	return nil
}

// MemoryBytes is --vm-memory in bytes (0: the provisioner's default).
func (f *Flags) MemoryBytes() int64 { return f.MemoryMiB << 20 }
