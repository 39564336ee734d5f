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
	"github.com/sealbench/sealbench/provision/apple"
	"github.com/sealbench/sealbench/provision/docker"
	"github.com/sealbench/sealbench/provision/lima"
	"github.com/sealbench/sealbench/provision/local"
	"github.com/sealbench/sealbench/provision/microsandbox"
)

// targetInfo says what a target is and what it needs of this host.
type targetInfo struct {
	name, what string
	root       bool // needs root here
	written    bool // its provisioner is written
}

// targets are the targets DESIGN.md names, in its order.
var targets = []targetInfo{
	{name: local.Name, what: "the Engine API stand-in on this host", root: true, written: true},
	{name: docker.Name, what: "the dockerd you have (DOCKER_HOST or the default socket)", written: true},
	{name: lima.Name, what: "a Lima VM under QEMU (TCG here), running the stand-in", root: true, written: true},
	{name: apple.Name, what: "an Apple container VM running the stand-in (macOS on Apple silicon)", written: true},
	{name: microsandbox.Name, what: "a microsandbox microVM running the stand-in (msb)", written: true},
}

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

func lookupTarget(name string) (targetInfo, bool) {
	for _, t := range targets {
		if t.name == name {
			return t, true
		}
	}
	return targetInfo{}, false
}

func writtenTargets() []string {
	var ns []string
	for _, t := range targets {
		if t.written {
			ns = append(ns, t.name)
		}
	}
	return ns
}

// checkTargets checks target names as --target and provision take them:
// known, written, not twice, and runnable by this user.
func checkTargets(names []string) error {
	seen := map[string]bool{}
	hint := "targets: " + strings.Join(writtenTargets(), ", ") + "; `sealbench doctor` says what this host can run"
	for _, n := range names {
		t, ok := lookupTarget(n)
		switch {
		case !ok:
			return usageErrorf(hint, "no target named %q", n)
		case !t.written:
			return usageErrorf(hint, "provisioning %s (%s) is not written yet", n, t.what)
		case seen[n]:
			return usageErrorf(hint, "target %s named twice", n)
		case t.root && os.Geteuid() != 0:
			return usageErrorf("run it as root (sudo); "+hint, "the %s target needs root: the stand-in runs Sandboxes as mount, PID and network namespaces", n)
		}
		seen[n] = true
	}
	return nil
}

// newTarget makes the provisioner of target name for run, from a verified
// bundle and its Sandbox image. It creates nothing.
func newTarget(name string, run *provision.Run, bundleDir string, res *bundle.VerifyResult, img engine.Image, vm vmSettings, logf func(string, ...any)) (provision.Target, error) {
	switch name {
	case lima.Name:
		dir, err := lima.DefaultVMImage()
		if err != nil {
			return nil, fmt.Errorf("finding the VM image (build it with `make vm-image`): %w", err)
		}
		return lima.New(lima.Options{Run: run, Bundle: bundleDir, Manifest: res.Manifest, VMImage: dir,
			CPUs: vm.cpus, MemoryBytes: vm.memoryMiB << 20, Log: logf})
	case apple.Name:
		return apple.New(apple.Options{Run: run, Image: img, CPUs: vm.cpus, MemoryBytes: vm.memoryMiB << 20, Log: logf})
	case microsandbox.Name:
		return microsandbox.New(microsandbox.Options{Run: run, Image: img, CPUs: vm.cpus, MemoryBytes: vm.memoryMiB << 20, Log: logf})
	case local.Name:
		f, ok := res.Manifest.File(local.StandinBundlePath())
		if !ok {
			return nil, usageErrorf("seal a bundle with the stand-in (sealbench seal)", "bundle %s has no %s", res.Name, local.StandinBundlePath())
		}
		return local.New(local.Options{Run: run, Bundle: bundleDir, Standin: f.Digest, Log: logf})
	case docker.Name:
		return docker.New(docker.Options{Run: run, Log: logf})
	}
	return nil, fmt.Errorf("no provisioner for target %q", name)
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
