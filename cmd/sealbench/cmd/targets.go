//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/host"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/kubernetes"
)

// vmSettings size the VM targets (lima, qemu, apple, microsandbox); zero
// means each provisioner's default. allowUntested lets apple and
// microsandbox drive a tool newer than the releases they were checked
// against; accel is qemu's accelerator (tcg unless the user says kvm).
type vmSettings struct {
	cpus          int
	memoryMiB     int64
	allowUntested bool
	accel         string
}

func (v *vmSettings) flags(fl *pflag.FlagSet) {
	fl.IntVar(&v.cpus, "vm-cpus", 0, fmt.Sprintf("CPUs of a VM target, 1 to %d (default: the provisioner's: 2 for lima and qemu, 4 for apple and microsandbox)", maxVMCPUs))
	fl.Int64Var(&v.memoryMiB, "vm-memory", 0, fmt.Sprintf("memory of a VM target in MiB, %d to %d (default: the provisioner's: 2048 for lima and qemu, 4096 for apple and microsandbox)", minVMMemoryMiB, maxVMMemoryMiB))
	var tools []string
	for _, r := range provision.Registered() {
		if r.Tools != "" {
			tools = append(tools, r.Name+": "+r.Tools)
		}
	}
	fl.BoolVar(&v.allowUntested, "allow-untested-tool", false, "drive a VM target's tool even when it is newer than the releases sealbench was checked against ("+
		strings.Join(tools, "; ")+"), with a warning naming them; without it a newer tool is refused")
	fl.StringVar(&v.accel, "accel", "tcg", "the qemu target's accelerator: tcg (software emulation, the default) or kvm; never chosen for you, because on some hosts /dev/kvm opens and guests hang")
}

// Bounds of the VM flags: zero is the provisioner's default; anything
// else must be a size a VM can have.
const (
	maxVMCPUs      = 1024
	minVMMemoryMiB = 256
	maxVMMemoryMiB = 16 << 20 // 16 TiB
)

// check refuses VM sizes no VM can have, before anything is made.
func (v vmSettings) check() error {
	if v.cpus < 0 || v.cpus > maxVMCPUs {
		return usageErrorf(fmt.Sprintf("--vm-cpus takes 1 to %d (0: the provisioner's default)", maxVMCPUs), "--vm-cpus %d is out of range", v.cpus)
	}
	if v.memoryMiB != 0 && (v.memoryMiB < minVMMemoryMiB || v.memoryMiB > maxVMMemoryMiB) {
		return usageErrorf(fmt.Sprintf("--vm-memory takes MiB, %d to %d (0: the provisioner's default)", minVMMemoryMiB, maxVMMemoryMiB), "--vm-memory %d is out of range", v.memoryMiB)
	}
	if v.accel != "" && v.accel != "tcg" && v.accel != "kvm" {
		return usageErrorf("--accel takes tcg or kvm", "--accel %q is neither", v.accel)
	}
	return nil
}

// host is the settings as package host takes them, with the kubernetes
// target's.
func (v vmSettings) host(k kubeSettings) host.VM {
	return host.VM{CPUs: v.cpus, MemoryMiB: v.memoryMiB, AllowUntestedTool: v.allowUntested, Accel: v.accel, Kube: k.o}
}

// kubeSettings say how the kubernetes target reaches its cluster and
// where its Sandboxes go.
type kubeSettings struct{ o provision.KubeOptions }

// flags adds --kubeconfig, and with all (run, provision) the rest.
func (k *kubeSettings) flags(fl *pflag.FlagSet, all bool) {
	fl.StringVar(&k.o.Kubeconfig, "kubeconfig", "", "for the kubernetes target: the kubeconfig that reaches the cluster (default: KUBECONFIG, then ~/.kube/config)")
	if !all {
		return
	}
	fl.StringVar(&k.o.Context, "kube-context", "", "for the kubernetes target: the kubeconfig's context to use (default: its current one)")
	fl.StringVar(&k.o.Namespace, "namespace", "", "for the kubernetes target: the namespace the Sandboxes' pods go in; it must exist (default: default)")
	fl.StringVar(&k.o.Node, "kube-node", "", "for the kubernetes target: the node the Sandboxes run on (default: the cluster's only node)")
	fl.StringVar(&k.o.FUSEResource, "kube-fuse-resource", "", "for the kubernetes target: the extended resource a device plugin offers /dev/fuse as (default: sealbench.dev/fuse)")
	fl.StringVar(&k.o.Containerd, "kube-containerd", "", "for the kubernetes target: the node's containerd socket, as this host reaches it (a node on this host), where the Sandbox image is imported (with --kube-image, pulled) and removed at teardown")
	fl.StringVar(&k.o.SeccompDir, "kube-seccomp-dir", "", "for the kubernetes target: the node kubelet's seccomp directory, as this host reaches it (default /var/lib/kubelet/seccomp), where the Sandboxes' seccomp profile goes")
	fl.StringVar(&k.o.Image, "kube-image", "", "for the kubernetes target: a registry repository the node pulls the Sandbox image from, instead of an import through --kube-containerd (REPO is REPO:<the bundle's tag>; REPO:TAG and REPO@sha256:... too); its id must be the bundle's, and pods name it REPO@sha256:<manifest digest>")
	fl.BoolVar(&k.o.Network, "kube-network", false, "for the kubernetes target: let the Sandboxes have the cluster's pod network (default: a NetworkPolicy denies them every connection)")
}

// check refuses a kubeconfig that is not a readable file, a containerd
// socket or seccomp directory that is not an absolute path and an image
// that is no registry reference, before anything is made.
func (k kubeSettings) check() error {
	if k.o.Kubeconfig != "" {
		if err := readableFile(k.o.Kubeconfig); err != nil {
			return usageErrorf("--kubeconfig takes a kubeconfig file you can read", "--kubeconfig: %v", err)
		}
	}
	if k.o.Containerd != "" && !filepath.IsAbs(k.o.Containerd) {
		return usageErrorf("--kube-containerd takes the socket's absolute path, such as /run/containerd/containerd.sock", "--kube-containerd %q is not an absolute path", k.o.Containerd)
	}
	if k.o.Image != "" {
		if _, err := kubernetes.ImageRef(k.o.Image, ""); err != nil {
			return usageErrorf("--kube-image takes a registry repository, such as registry.example.com:5000/sealbench/sandbox (a :TAG or @sha256:DIGEST too)", "--kube-image: %v", err)
		}
	}
	if k.o.SeccompDir != "" && !filepath.IsAbs(k.o.SeccompDir) {
		return usageErrorf("--kube-seccomp-dir takes the directory's absolute path, such as /var/lib/kubelet/seccomp", "--kube-seccomp-dir %q is not an absolute path", k.o.SeccompDir)
	}
	return nil
}

// apply makes --kubeconfig the kubeconfig of this process (KUBECONFIG),
// for the commands whose kubernetes target reaches the cluster through
// client-go's defaults: teardown, audit and doctor.
func (k kubeSettings) apply() error {
	if k.o.Kubeconfig == "" {
		return nil
	}
	if err := k.check(); err != nil {
		return err
	}
	abs, err := filepath.Abs(k.o.Kubeconfig)
	if err != nil {
		return err
	}
	return os.Setenv("KUBECONFIG", abs)
}

// sshSettings say how remote hosts (KIND@ssh://USER@HOST) are reached.
type sshSettings struct {
	identity, knownHosts string
}

func (s *sshSettings) flags(fl *pflag.FlagSet) {
	fl.StringVar(&s.identity, "ssh-identity", "", "for targets on remote hosts: the private key to log in with, alone (it must need no passphrase; default: your ssh agent and ~/.ssh/id_{ed25519,ecdsa,rsa})")
	fl.StringVar(&s.knownHosts, "ssh-known-hosts", "", "for targets on remote hosts: the known_hosts file their host keys are checked against (default ~/.ssh/known_hosts); an unknown or changed key is refused")
}

// check refuses an identity or known_hosts file that is not a readable
// file, before anything is made.
func (s sshSettings) check() error {
	for _, f := range []struct{ flag, path string }{{"--ssh-identity", s.identity}, {"--ssh-known-hosts", s.knownHosts}} {
		if f.path == "" {
			continue
		}
		if err := readableFile(f.path); err != nil {
			return usageErrorf(f.flag+" takes a file you can read", "%s: %v", f.flag, err)
		}
	}
	return nil
}

func (s sshSettings) host() host.SSH { return host.SSH{Identity: s.identity, KnownHosts: s.knownHosts} }

// readableFile is nil when p is a regular file this process can open.
func readableFile(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	return fh.Close()
}
