//go:build !sealbench_bundle

package cmd

import (
	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/host"
)

// vmSettings size the VM targets (lima, apple, microsandbox); zero means
// each provisioner's default.
type vmSettings struct {
	cpus      int
	memoryMiB int64
}

func (v *vmSettings) flags(fl *pflag.FlagSet) {
	fl.IntVar(&v.cpus, "vm-cpus", 0, "CPUs of a VM target (default: the provisioner's: 2 for lima, 4 for apple and microsandbox)")
	fl.Int64Var(&v.memoryMiB, "vm-memory", 0, "memory of a VM target in MiB (default: the provisioner's: 2048 for lima, 4096 for apple and microsandbox)")
}

func (v vmSettings) host() host.VM { return host.VM{CPUs: v.cpus, MemoryMiB: v.memoryMiB} }
