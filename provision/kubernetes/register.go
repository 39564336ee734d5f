package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// CheckName is the doctor's check of the cluster.
const CheckName = "kubernetes"

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "Sandboxes as pods of a Kubernetes cluster (kubernetes[:RUNTIMECLASS][@NODE]), through the kube-engine", Order: 80,
		Param: "RUNTIMECLASS", At: "NODE",
		New: func(o provision.NewOptions) (provision.Target, error) {
			return New(Options{Run: o.Run, Name: o.Name, Node: o.Node, Kube: *provision.OptionsOf[Flags](o.Options), RuntimeClass: o.Param, Log: o.Log})
		},
		Options:     []func() provision.Options{newFlags},
		Subcommands: []provision.Subcommand{engineSubcommand},
		Help: `Each Sandbox a pod on one node (kubernetes@NODE, or --kube-node), with
/dev/fuse from a device plugin's resource, reached through the kube-engine
(a process of the run: the Engine API in front of the cluster, an exec the
pod's exec subresource); the image imported into the node's containerd
(--kube-containerd) or pulled from a registry (--kube-image), its id
checked; a NetworkPolicy denies the pods every connection.`,
		Examples: []string{
			"  # Pods of a Kubernetes cluster beside the stand-in, their RuntimeClass gvisor:\n  sudo sealbench run --target local,kubernetes:gvisor --kubeconfig ~/.kube/config \\\n    --kube-containerd /run/containerd/containerd.sock --native",
			"  # Two nodes of a cluster at once (kubernetes-node-1, kubernetes-node-2), the image from your registry:\n  sealbench run --target kubernetes@node-1,kubernetes@node-2 \\\n    --kube-image registry.example.com:5000/sealbench/sandbox",
			"  # Pods of the cluster your kubeconfig names, the image imported into the node's containerd;\n  # DOCKER_HOST is then the kube-engine, which maps the Engine API to pods:\n  sudo sealbench provision kubernetes --bundle out/build-linux-0123456789ab \\\n    --kubeconfig ~/.kube/config --kube-containerd /run/containerd/containerd.sock",
			"  # A node anywhere: it pulls the image from your registry, where its id is checked first:\n  sealbench provision kubernetes --bundle out/build-linux-0123456789ab \\\n    --kubeconfig ~/.kube/config --kube-image registry.example.com:5000/sealbench/sandbox",
		},
		Backend: backend{},
		Needs:   []string{CheckName},
		Note:    "pods on one node of the cluster your kubeconfig names; /dev/fuse from a device plugin's resource (" + DefaultFUSEResource + " unless --kube-fuse-resource)",
		Checks: func(ctx context.Context) []provision.Check {
			return []provision.Check{Check(ctx, kubeengine.Config{})}
		},
	})
}

func init() {
	provision.Register(provision.Registration{
		Name: AgentSandboxName, What: "Sandboxes as agent-sandbox Sandboxes on a Kubernetes cluster (agent-sandbox[:RUNTIMECLASS][@NODE]), through the kube-engine", Order: 81,
		Param: "RUNTIMECLASS", At: "NODE",
		New: func(o provision.NewOptions) (provision.Target, error) {
			return New(Options{Run: o.Run, Name: o.Name, Node: o.Node, Kube: *provision.OptionsOf[Flags](o.Options), RuntimeClass: o.Param, Log: o.Log, AgentSandbox: true})
		},
		Options: []func() provision.Options{newFlags},
		Help: `As the kubernetes target, but each Sandbox is an agent-sandbox Sandbox
(sigs.k8s.io/agent-sandbox, agents.x-k8s.io/v1beta1), the way agent
platforms run sandboxes: its pod template is the pod the kubernetes target
would make, the cluster's agent-sandbox controller makes the pod, and the
Sandbox is waited for until Ready; removing one deletes the Sandbox and its
pod. The cluster must run agent-sandbox's controller (v1.0.1 or later);
the pins record its version and the RuntimeClass.`,
		Examples: []string{
			"  # agent-sandbox Sandboxes under gVisor beside pods under gVisor and the stand-in:\n  sudo sealbench run --target local,kubernetes:gvisor,agent-sandbox:gvisor --kubeconfig ~/.kube/config \\\n    --kube-containerd /run/containerd/containerd.sock --cells C01,C09",
		},
		// The kubernetes target's Backend lists agent-sandbox's objects
		// for the audit; this one removes its ledger's entries.
		Backend: sandboxBackend{},
		Needs:   []string{CheckName},
		Note:    "agent-sandbox's controller on the cluster your kubeconfig names; otherwise as kubernetes",
	})
}

func init() {
	provision.Register(provision.Registration{
		Name: AgentSandboxWarmName, What: "Sandboxes claimed from an agent-sandbox SandboxWarmPool on a Kubernetes cluster (agent-sandbox-warm[:RUNTIMECLASS][@NODE]), through the kube-engine", Order: 82,
		Param: "RUNTIMECLASS", At: "NODE",
		New: func(o provision.NewOptions) (provision.Target, error) {
			f := *provision.OptionsOf[Flags](o.Options)
			return New(Options{Run: o.Run, Name: o.Name, Node: o.Node, Kube: f, RuntimeClass: o.Param, Log: o.Log, AgentSandbox: true, WarmPool: cmp.Or(f.WarmPool, DefaultWarmPool)})
		},
		Options: []func() provision.Options{newFlags},
		Help: `As the agent-sandbox target, but each Sandbox is claimed the way agent
platforms hand one out fast: a SandboxClaim on a SandboxWarmPool that
keeps --kube-warm-pool Sandboxes (default 2) running from a
SandboxTemplate. The kube-engine makes the template and the pool at the
run's first Sandbox, from its pod; agent-sandbox's controller adopts a
ready Sandbox of the pool for each claim, or, when none is ready, makes a
cold one from the template. Time to a usable Sandbox is then the claim's.
Removing a Sandbox deletes its claim, its Sandbox and its pod; teardown
removes the pool with the Sandboxes it keeps, then the template.`,
		Examples: []string{
			"  # Time to a usable Sandbox, cold and from a warm pool, side by side under gVisor:\n  sudo sealbench run --target local,agent-sandbox:gvisor,agent-sandbox-warm:gvisor --kubeconfig ~/.kube/config \\\n    --kube-containerd /run/containerd/containerd.sock --cells C01,C09",
		},
		Backend: sandboxBackend{},
		Needs:   []string{CheckName},
		Note:    "agent-sandbox's controller, with its extensions, on the cluster your kubeconfig names; a warm pool of --kube-warm-pool Sandboxes",
	})
}

// sandboxBackend is the agent-sandbox target's runs.Backend: the
// kubernetes target's, whose audit already lists every labelled object,
// agent-sandbox's among them.
type sandboxBackend struct{ backend }

func (sandboxBackend) Audit(context.Context, string) ([]runs.Resource, []string, error) {
	return nil, nil, nil
}

// Check says whether the cluster of c's kubeconfig (client-go's default
// when it names none) answers, and what it is: its version, its nodes,
// and how many of them offer the FUSE resource.
func Check(ctx context.Context, c kubeengine.Config) provision.Check {
	ck := provision.Check{Name: CheckName, Fix: "point --kubeconfig (or KUBECONFIG) at a cluster you can reach, with --kube-context for a context other than the current one"}
	if c.Kubeconfig == "" && !haveKubeconfig() {
		ck.Detail = "no kubeconfig: KUBECONFIG is not set and ~/.kube/config is not there"
		return ck
	}
	cl, err := connect(c)
	if err != nil {
		ck.Detail = err.Error()
		return ck
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := cl.cs.Discovery().ServerVersion()
	if err != nil {
		ck.Detail = fmt.Sprintf("the API server at %s does not answer: %v", cl.host, err)
		return ck
	}
	nodes, err := cl.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		ck.Detail = fmt.Sprintf("Kubernetes %s at %s, but listing its nodes failed: %v", v.GitVersion, cl.host, err)
		return ck
	}
	res := c.FUSEResource
	if res == "" {
		res = DefaultFUSEResource
	}
	var withFUSE []string
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[corev1.ResourceName(res)]; ok && !q.IsZero() {
			withFUSE = append(withFUSE, n.Name)
		}
	}
	detail := fmt.Sprintf("Kubernetes %s at %s: %d nodes; %s on %s", v.GitVersion, cl.host, len(nodes.Items), res, strings.Join(withFUSE, ", "))
	if len(withFUSE) == 0 {
		ck.Detail = detail + "none"
		ck.Fix = "run a device plugin that offers /dev/fuse as " + res + " on the node the Sandboxes run on, or name the resource yours offers with --kube-fuse-resource"
		return ck
	}
	ck.OK, ck.Detail, ck.Fix = true, detail, ""
	return ck
}

// engineSubcommand is the kube-engine: a background process of the run
// (recorded in its ledger before it starts) that serves, on a unix socket
// in the run directory, the Engine API calls sealbench makes, a container
// being a pod of the cluster and an exec the pod's exec subresource.
var engineSubcommand = provision.Subcommand{
	Name: EngineSubcommand, Usage: "--socket S --namespace NS --node N --run ID [--kubeconfig F] [--context C] [--runtime-class RC] [--fuse-resource R] [--containerd SOCK]",
	Short: "Serve the kubernetes target's Engine socket in front of a cluster (started by provision)",
	Run: func(ctx context.Context, args []string, _ func(string, ...any)) error {
		cfg, err := kubeengine.ParseArgs(args)
		if err != nil {
			return &provision.UsageError{Err: err, Hint: "this command is started by `sealbench provision --target kubernetes`"}
		}
		return kubeengine.Serve(ctx, cfg)
	},
}
