//go:build !sealbench_bundle

package cmd

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/provision"
	_ "github.com/sealbench/sealbench/provision/targets"
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

// checkTargets checks target names as --target and provision take them:
// registered, not twice, and runnable by this user.
func checkTargets(names []string) error {
	seen := map[string]bool{}
	hint := "targets: " + strings.Join(provision.Names(), ", ") + "; `sealbench doctor` says what this host can run"
	for _, n := range names {
		t, ok := provision.Lookup(n)
		switch {
		case !ok:
			return usageErrorf(hint, "no target named %q", n)
		case seen[n]:
			return usageErrorf(hint, "target %s named twice", n)
		case t.Root && os.Geteuid() != 0:
			return usageErrorf("run it as root (sudo); "+hint, "the %s target needs root: the stand-in runs Sandboxes as mount, PID and network namespaces", n)
		}
		seen[n] = true
	}
	return nil
}

// newTarget makes the provisioner of target name for run, from a verified
// bundle and its Sandbox image. It creates nothing.
func newTarget(name string, run *provision.Run, bundleDir string, res *bundle.VerifyResult, img engine.Image, vm vmSettings, logf func(string, ...any)) (provision.Target, error) {
	t, ok := provision.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no provisioner for target %q", name)
	}
	return t.New(provision.NewOptions{Run: run, Bundle: bundleDir, Manifest: res.Manifest, BundleName: res.Name, Image: img,
		CPUs: vm.cpus, MemoryBytes: vm.memoryMiB << 20, Log: logf})
}

// bringUp creates t, installs the Sandbox image and asks its identity.
func bringUp(ctx context.Context, t provision.Target, img engine.Image, logf func(string, ...any)) (*engine.Identity, error) {
	if err := t.Create(ctx); err != nil {
		return nil, fmt.Errorf("bringing up %s: %w", t.Name(), err)
	}
	logf("%s is up at %s; loading %s", t.Name(), t.Endpoint(), img.Ref)
	if err := t.InstallImage(ctx, img); err != nil {
		return nil, fmt.Errorf("installing the Sandbox image into %s: %w", t.Name(), err)
	}
	id, err := t.Identity(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking %s for its identity: %w", t.Name(), err)
	}
	return id, nil
}
