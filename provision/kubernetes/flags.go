package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/provision"
)

// Flags say how the kubernetes target reaches its cluster and where its
// Sandboxes go: the --kubeconfig (every command that takes targets' flags:
// teardown, audit and doctor reach the cluster through it too),
// --kube-context, --namespace, --kube-node, --kube-fuse-resource,
// --kube-containerd, --kube-seccomp-dir, --kube-network and --kube-image
// flags of run and provision. Empty strings are the target's defaults.
type Flags struct {
	Kubeconfig   string // empty: KUBECONFIG, then ~/.kube/config
	Context      string // empty: the kubeconfig's current context
	Namespace    string // empty: the kubeconfig context's namespace, else default
	Node         string // empty: the cluster's only node
	FUSEResource string // the extended resource that gives a container /dev/fuse
	// Containerd is the node's containerd socket as this host reaches it
	// (a node on this host), where the Sandbox image is imported.
	Containerd string
	// SeccompDir is the node kubelet's seccomp directory as this host
	// reaches it, where the Sandboxes' seccomp profile is written.
	SeccompDir string
	// Network lets the Sandboxes have the cluster's pod network; without
	// it the target denies them every connection (a NetworkPolicy).
	Network bool
	// Image is a registry repository (REPO, REPO:TAG or REPO@DIGEST;
	// REPO alone is at the bundle image's tag) the node pulls the Sandbox
	// image from, its id checked there first, instead of an import into
	// the node's containerd.
	Image string
	// WarmPool is how many Sandboxes the agent-sandbox-warm target's
	// SandboxWarmPool keeps ready; 0: DefaultWarmPool.
	WarmPool int
}

var (
	_ provision.Options = (*Flags)(nil)
	_ provision.Applier = (*Flags)(nil)
)

func newFlags() provision.Options { return &Flags{} }

func (f *Flags) Kind() string { return Name }

func (f *Flags) Flags(fs *pflag.FlagSet, c provision.Command) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "for the kubernetes target: the kubeconfig that reaches the cluster (default: KUBECONFIG, then ~/.kube/config)")
	if !c.MakesTargets() {
		return
	}
	fs.StringVar(&f.Context, "kube-context", "", "for the kubernetes target: the kubeconfig's context to use (default: its current one)")
	fs.StringVar(&f.Namespace, "namespace", "", "for the kubernetes target: the namespace the Sandboxes' pods go in; it must exist (default: the kubeconfig context's namespace, as kubectl takes it, else default)")
	fs.StringVar(&f.Node, "kube-node", "", "for the kubernetes target: the node the Sandboxes run on (default: the cluster's only node)")
	fs.StringVar(&f.FUSEResource, "kube-fuse-resource", "", "for the kubernetes target: the extended resource a device plugin offers /dev/fuse as (default: "+DefaultFUSEResource+")")
	fs.StringVar(&f.Containerd, "kube-containerd", "", "for the kubernetes target: the node's containerd socket, as this host reaches it (a node on this host), where the Sandbox image is imported (with --kube-image, pulled) and removed at teardown")
	fs.StringVar(&f.SeccompDir, "kube-seccomp-dir", "", "for the kubernetes target: the node kubelet's seccomp directory, as this host reaches it (default "+DefaultSeccompDir+"), where the Sandboxes' seccomp profile goes")
	fs.StringVar(&f.Image, "kube-image", "", "for the kubernetes target: a registry repository the node pulls the Sandbox image from, instead of an import through --kube-containerd (REPO is REPO:<the bundle's tag>; REPO:TAG and REPO@sha256:... too); its id must be the bundle's, and pods name it REPO@sha256:<manifest digest>")
	fs.IntVar(&f.WarmPool, "kube-warm-pool", 0, fmt.Sprintf("for the agent-sandbox-warm target: how many Sandboxes its SandboxWarmPool keeps ready to claim, from 1 to %d (default %d)", kubeengine.MaxWarmPool, DefaultWarmPool))
	fs.BoolVar(&f.Network, "kube-network", false, "for the kubernetes target: let the Sandboxes have the cluster's pod network (default: a NetworkPolicy denies them every connection)")
}

// Check refuses a kubeconfig that is not a readable file, a containerd
// socket or seccomp directory that is not an absolute path and an image
// that is no registry reference, before anything is made.
func (f *Flags) Check() error {
	if f.Kubeconfig != "" {
		if err := provision.ReadableFile(f.Kubeconfig); err != nil {
			return &provision.UsageError{Err: fmt.Errorf("--kubeconfig: %w", err), Hint: "--kubeconfig takes a kubeconfig file you can read"}
		}
	}
	if f.Containerd != "" && !filepath.IsAbs(f.Containerd) {
		return &provision.UsageError{Err: fmt.Errorf("--kube-containerd %q is not an absolute path", f.Containerd),
			Hint: "--kube-containerd takes the socket's absolute path, such as /run/containerd/containerd.sock"}
	}
	if f.Image != "" {
		if _, err := ImageRef(f.Image, ""); err != nil {
			return &provision.UsageError{Err: fmt.Errorf("--kube-image: %w", err),
				Hint: "--kube-image takes a registry repository, such as registry.example.com:5000/sealbench/sandbox (a :TAG or @sha256:DIGEST too)"}
		}
	}
	if f.WarmPool < 0 || f.WarmPool > kubeengine.MaxWarmPool {
		return &provision.UsageError{Err: fmt.Errorf("--kube-warm-pool %d is not from 1 to %d", f.WarmPool, kubeengine.MaxWarmPool),
			Hint: "--kube-warm-pool takes how many Sandboxes the warm pool keeps ready, such as 2"}
	}
	if f.SeccompDir != "" && !filepath.IsAbs(f.SeccompDir) {
		return &provision.UsageError{Err: fmt.Errorf("--kube-seccomp-dir %q is not an absolute path", f.SeccompDir),
			Hint: "--kube-seccomp-dir takes the directory's absolute path, such as /var/lib/kubelet/seccomp"}
	}
	return nil
}

// Apply makes --kubeconfig the kubeconfig of this process (KUBECONFIG),
// for the commands whose kubernetes target reaches the cluster through
// client-go's defaults: teardown, audit and doctor.
func (f *Flags) Apply() error {
	if f.Kubeconfig == "" {
		return nil
	}
	abs, err := filepath.Abs(f.Kubeconfig)
	if err != nil {
		return err
	}
	return os.Setenv("KUBECONFIG", abs)
}
