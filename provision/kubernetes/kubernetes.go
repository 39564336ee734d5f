// Package kubernetes provisions the kubernetes target: Sandboxes as pods
// of a Kubernetes cluster, on one node, with the cluster's RuntimeClass
// (`--target kubernetes[:RUNTIMECLASS]`).
//
// The runner speaks only the Engine API, so the target puts the
// kube-engine in front of the cluster (package kubeengine, run in the
// background as `sealbench kube-engine`): it serves the Engine API calls
// sealbench makes on a 0600 socket in the run directory, a container
// being a pod and an exec the pod's exec subresource. Every exec's
// overhead therefore includes that transport (Transport, in the pins and
// the report), as msb exec's does for microsandbox.
//
// What Create does, in order, every step recorded in the ledger first:
//
//   - writes the target's record (kubernetes.json in the run directory): the kubeconfig, context, namespace, node, RuntimeClass,
//     FUSE resource and containerd socket, so that teardown and the audit
//     reach the same cluster after this process is gone;
//   - checks the cluster answers, the namespace exists, the node (the only
//     one when none is named) and the RuntimeClass;
//   - unless Flags.Network, a NetworkPolicy that denies the run's
//     pods every connection, both ways (enforced where the cluster's
//     network plugin enforces policies);
//   - starts the kube-engine and waits for it to answer.
//
// InstallImage loads the Sandbox image through the kube-engine into the
// node's containerd, or (Flags.Image) checks its id in a registry
// and has the node pull that manifest by digest; each pod then runs it,
// checked again when it runs. Teardown deletes the run's pods, images and objects through
// the cluster's API (and the node's containerd), whether or not a
// kube-engine still runs: the package's Backend serves them itself.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/runs"
)

// Name is the target's kind, and its name when the --target names no
// node (kubernetes@NODE is named kubernetes-NODE, or as NAME= says).
const Name = "kubernetes"

// Transport is how the runner's execs reach a Sandbox, as the pins say:
// the kube-engine, then the pod exec subresource through the API server
// and the kubelet.
const Transport = "kube-exec"

// EngineSubcommand is the hidden sealbench command that runs the
// kube-engine (kubeengine.Serve with kubeengine.ParseArgs' flags).
const EngineSubcommand = "kube-engine"

// Defaults of Flags.
const (
	DefaultNamespace    = "default"
	DefaultFUSEResource = "sealbench.dev/fuse"
	// DefaultSeccompDir is the seccomp directory of a kubelet with its
	// default root directory.
	DefaultSeccompDir = "/var/lib/kubelet/seccomp"
)

// ReadyTimeout bounds the wait for the kube-engine to answer.
const ReadyTimeout = time.Minute

var _ provision.Target = (*Kubernetes)(nil)

// Options configures the kubernetes target.
type Options struct {
	Run *runs.Run
	// Name is the target's name in the run (its directory, record, ledger
	// entries, samples and pins); empty: Name.
	Name string
	// Node is the node the --target named (kubernetes@NODE); empty:
	// Kube.Node, or the cluster's only node.
	Node string
	Kube Flags
	// RuntimeClass is the pods' RuntimeClass (the --target's parameter);
	// empty: the cluster's default.
	RuntimeClass string
	// AgentSandbox makes it the agent-sandbox target: each Sandbox an
	// agent-sandbox Sandbox (agents.x-k8s.io/v1beta1) whose pod template
	// is the pod the kubernetes target would make, which the cluster's
	// agent-sandbox controller runs (kubeengine.Config.AgentSandbox).
	AgentSandbox bool
	// WarmPool, with AgentSandbox, makes it the agent-sandbox-warm
	// target: each Sandbox claimed (a SandboxClaim) from a SandboxWarmPool
	// of WarmPool Sandboxes (kubeengine.Config.WarmPool).
	WarmPool int
	// EngineCommand starts the kube-engine: an absolute binary and the
	// arguments before kubeengine.Config.Args (default: this executable
	// and EngineSubcommand).
	EngineCommand []string
	Log           func(format string, args ...any)
}

// Kubernetes is one run's Sandboxes on a cluster.
type Kubernetes struct {
	o      Options
	name   string
	dir    string // the target's directory in the run directory
	cfg    kubeengine.Config
	engine []string // Options.EngineCommand
	logp   string   // the kube-engine's log
	exited chan struct{}
}

// New returns the kubernetes target of o.Run. It creates nothing and
// reaches no cluster yet.
func New(o Options) (*Kubernetes, error) {
	if o.Run == nil {
		return nil, errors.New("kubernetes target: no run")
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	cmd, err := vmtarget.HelperCommand(Name, "kube-engine", o.EngineCommand, EngineSubcommand)
	if err != nil {
		return nil, err
	}
	kube := o.Kube
	if kube.FUSEResource == "" {
		kube.FUSEResource = DefaultFUSEResource
	}
	if kube.SeccompDir == "" {
		kube.SeccompDir = DefaultSeccompDir
	}
	if kube.Kubeconfig != "" {
		if kube.Kubeconfig, err = filepath.Abs(kube.Kubeconfig); err != nil {
			return nil, err
		}
	} else {
		// The record names the kubeconfig this run used, so that a
		// teardown from another shell reaches the same cluster.
		kube.Kubeconfig = os.Getenv("KUBECONFIG")
	}
	if o.Node != "" {
		kube.Node = o.Node
	}
	if kube.Namespace == "" {
		// As kubectl: the kubeconfig context's namespace, else default.
		kube.Namespace = contextNamespace(kube)
	}
	o.Kube = kube
	name := o.Name
	if name == "" {
		name = Name
		if o.AgentSandbox {
			name = AgentSandboxName
		}
		if o.WarmPool > 0 {
			name = AgentSandboxWarmName
		}
	}
	dir := filepath.Join(o.Run.Dir, name)
	return &Kubernetes{o: o, name: name, dir: dir, engine: cmd, logp: filepath.Join(dir, "kube-engine.log"),
		cfg: kubeengine.Config{Socket: filepath.Join(dir, "engine.sock"), Kubeconfig: kube.Kubeconfig, Context: kube.Context,
			Namespace: kube.Namespace, Node: kube.Node, RuntimeClass: o.RuntimeClass, FUSEResource: kube.FUSEResource,
			Containerd: kube.Containerd, SeccompDir: kube.SeccompDir, RunID: o.Run.ID, Target: name, AgentSandbox: o.AgentSandbox, WarmPool: o.WarmPool}}, nil
}

func (k *Kubernetes) Name() string     { return k.name }
func (k *Kubernetes) Endpoint() string { return "unix://" + k.cfg.Socket }

// Dir is the target's directory in the run directory.
func (k *Kubernetes) Dir() string { return k.dir }

// Config is the kube-engine's configuration (its Node once Create has
// picked it).
func (k *Kubernetes) Config() kubeengine.Config { return k.cfg }

func (k *Kubernetes) record(e manifests.LedgerEntry) error {
	e.Target = k.name
	return k.o.Run.Ledger.Record(e)
}

func (k *Kubernetes) engineRunning() bool {
	return len(runs.FindProcs(runs.MarkedBy(k.engine[0], k.cfg.Socket))) > 0
}

// touched reports whether the run's ledger names anything of the target:
// whether Create ever got as far as the cluster.
func (k *Kubernetes) touched() bool {
	for _, e := range k.o.Run.Ledger.Entries() {
		if e.Target == k.name {
			return true
		}
	}
	return false
}

// Create checks the cluster, picks the node, makes the NetworkPolicy and
// starts the kube-engine; when the kube-engine runs and answers already,
// it does nothing.
func (k *Kubernetes) Create(ctx context.Context) error {
	if k.engineRunning() && engine.Ping(ctx, k.Endpoint(), 10*time.Second) == nil {
		return nil
	}
	if err := k.record(manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: k.dir, Detail: "the kubernetes target's record, socket and log"}); err != nil {
		return err
	}
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return err
	}
	c, err := connect(k.cfg)
	if err != nil {
		return err
	}
	if err := k.check(ctx, c); err != nil {
		return err
	}
	if err := writeRecord(k.o.Run.Dir, k.name, k.cfg); err != nil {
		return err
	}
	if !k.o.Kube.Network {
		if err := k.denyNetwork(ctx, c.cs); err != nil {
			return err
		}
	}
	if err := k.recordWarmPool(); err != nil {
		return err
	}
	if err := k.startEngine(); err != nil {
		return err
	}
	k.o.Log("started the kube-engine for node %s of %s, waiting for %s", k.cfg.Node, c.host, k.Endpoint())
	deadline := time.Now().Add(ReadyTimeout)
	for {
		err := engine.Ping(ctx, k.Endpoint(), 5*time.Second)
		if err == nil {
			return nil
		}
		if !vmtarget.Running(k.exited, k.engineRunning) {
			return fmt.Errorf("the kube-engine exited; its log, %s:\n%s", k.logp, vmtarget.Tail(k.logp, 3000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kube-engine did not answer at %s in %s: %w; its log, %s:\n%s", k.Endpoint(), ReadyTimeout, err, k.logp, vmtarget.Tail(k.logp, 3000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// check makes sure the cluster answers, the namespace is there, and the
// node and RuntimeClass exist; it picks the node when none was named.
func (k *Kubernetes) check(ctx context.Context, c *cluster) error {
	if _, err := c.cs.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("the Kubernetes API server at %s does not answer: %w", c.host, err)
	}
	if _, err := c.cs.CoreV1().Namespaces().Get(ctx, k.cfg.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return &provision.InputError{Err: fmt.Errorf("the namespace %s is not in the cluster at %s", k.cfg.Namespace, c.host),
				Hint: "create it (kubectl create namespace " + k.cfg.Namespace + "), or name another with --namespace (without it, the namespace is the kubeconfig context's, as kubectl's is)"}
		}
		return fmt.Errorf("reading the namespace %s: %w", k.cfg.Namespace, err)
	}
	if k.cfg.Node == "" {
		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the cluster's nodes: %w", err)
		}
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
		if len(names) != 1 {
			return &provision.InputError{Err: fmt.Errorf("the cluster at %s has %d nodes (%s): which one the Sandboxes run on is yours to say", c.host, len(names), strings.Join(names, ", ")),
				Hint: "name one with --kube-node"}
		}
		k.cfg.Node = names[0]
	} else if _, err := c.cs.CoreV1().Nodes().Get(ctx, k.cfg.Node, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return &provision.InputError{Err: fmt.Errorf("the cluster at %s has no node %s", c.host, k.cfg.Node), Hint: "kubectl get nodes lists them"}
		}
		return fmt.Errorf("reading the node %s: %w", k.cfg.Node, err)
	}
	if k.cfg.AgentSandbox {
		if _, err := agentSandboxVersion(ctx, c); err != nil {
			return err
		}
	}
	if k.cfg.RuntimeClass != "" {
		if _, err := c.cs.NodeV1().RuntimeClasses().Get(ctx, k.cfg.RuntimeClass, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return &provision.InputError{Err: fmt.Errorf("the cluster at %s has no RuntimeClass %s", c.host, k.cfg.RuntimeClass),
					Hint: "kubectl get runtimeclasses lists them; --target kubernetes alone uses the cluster's default"}
			}
			return fmt.Errorf("reading the RuntimeClass %s: %w", k.cfg.RuntimeClass, err)
		}
	}
	return nil
}

// policyName is the NetworkPolicy of the run's target: one per target,
// so that one target's Destroy leaves the others' Sandboxes denied.
func policyName(run, target string) string {
	if target == Name {
		return "sealbench-" + strings.ToLower(run)
	}
	return "sealbench-" + strings.ToLower(run) + "-" + target
}

// denyNetwork makes the NetworkPolicy that selects the run's pods and
// allows them nothing, in or out.
func (k *Kubernetes) denyNetwork(ctx context.Context, cs kubernetes.Interface) error {
	name := policyName(k.o.Run.ID, k.name)
	labels := map[string]string{manifests.RunLabel: k.o.Run.ID}
	// It selects every pod of the run; its own label says whose it is.
	own := map[string]string{manifests.RunLabel: k.o.Run.ID, kubeengine.LabelTarget: k.name}
	if err := k.record(manifests.LedgerEntry{Kind: manifests.ResourceKubeObject, Key: objectKey(resNetworkPolicies, k.cfg.Namespace, name), Labels: own,
		Detail: "denies the run's pods every connection"}); err != nil {
		return err
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.cfg.Namespace, Labels: own},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := cs.NetworkingV1().NetworkPolicies(k.cfg.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the NetworkPolicy %s/%s: %w", k.cfg.Namespace, name, err)
	}
	return nil
}

// startEngine starts the kube-engine in the background, recorded first.
func (k *Kubernetes) startEngine() error {
	if k.engineRunning() {
		return nil
	}
	if err := k.record(manifests.LedgerEntry{Kind: manifests.ResourceSocket, Key: k.cfg.Socket, Detail: "the kube-engine's socket"}); err != nil {
		return err
	}
	if err := k.record(manifests.LedgerEntry{Kind: manifests.ResourceProcess, Key: k.cfg.Socket, Exe: k.engine[0], Detail: "the kube-engine"}); err != nil {
		return err
	}
	exited, err := vmtarget.StartBackground(append(append([]string(nil), k.engine...), k.cfg.Args()...), k.dir, k.logp)
	if err != nil {
		return fmt.Errorf("the kube-engine: %w", err)
	}
	k.exited = exited
	return nil
}

// InstallImage loads img through the kube-engine into the node's
// container runtime, or, with Flags.Image, has the node pull it
// from that registry once its id is checked there (pullImage).
func (k *Kubernetes) InstallImage(ctx context.Context, img engine.Image) error {
	cli, err := engine.NewClient(k.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	if k.o.Kube.Image != "" {
		return k.pullImage(ctx, cli, img)
	}
	return engine.LoadImage(ctx, cli, k.o.Run.Ledger, k.name, k.Endpoint(), img)
}

// Identity asks the kube-engine (the node's kernel, CPUs and memory) and
// the cluster (its version, the node's container runtime, the
// RuntimeClass's handler).
func (k *Kubernetes) Identity(ctx context.Context) (*engine.Identity, error) {
	id, err := engine.Identify(ctx, k.name, k.Endpoint())
	if err != nil {
		return nil, err
	}
	c, err := connect(k.cfg)
	if err != nil {
		return nil, err
	}
	v, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("asking the API server at %s its version: %w", c.host, err)
	}
	n, err := c.cs.CoreV1().Nodes().Get(ctx, k.cfg.Node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the node %s: %w", k.cfg.Node, err)
	}
	// Runtime is what the kube-engine takes as a container's
	// HostConfig.Runtime: the RuntimeClass.
	id.Transport, id.Cluster, id.Node, id.Runtime = Transport, v.GitVersion, n.Name, k.cfg.RuntimeClass
	id.ContainerRuntime, id.NodeBootID = n.Status.NodeInfo.ContainerRuntimeVersion, n.Status.NodeInfo.BootID
	if k.cfg.RuntimeClass != "" {
		rc, err := c.cs.NodeV1().RuntimeClasses().Get(ctx, k.cfg.RuntimeClass, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the RuntimeClass %s: %w", k.cfg.RuntimeClass, err)
		}
		id.RuntimeHandler = rc.Handler
		if GVisorHandler(rc.Handler) {
			// gVisor's Sentry serves the pods' /dev/fuse, with a FUSE of
			// its own (no mmap(2) of a file: the runner finds C12
			// ineligible), as on the gvisor target.
			id.FUSE = manifests.FUSEGVisor
		}
	}
	if k.cfg.AgentSandbox {
		if id.AgentSandbox, err = agentSandboxVersion(ctx, c); err != nil {
			return nil, err
		}
		id.WarmPool = k.cfg.WarmPool
	}
	return id, nil
}

// GVisorHandler says whether a RuntimeClass's handler is gVisor's, by the
// names containerd's runsc shim goes by: runsc (gVisor's documentation,
// the test cluster's) and gvisor (GKE Sandbox's), alone or as a prefix
// (runsc-kvm, gvisor-systrap).
func GVisorHandler(handler string) bool {
	for _, n := range []string{"runsc", "gvisor"} {
		if handler == n || strings.HasPrefix(handler, n+"-") {
			return true
		}
	}
	return false
}

// Destroy removes what the run's ledger names of the target (its pods,
// images and NetworkPolicy through the cluster, the kube-engine, its
// directory), then any pod or NetworkPolicy still labelled with the run:
// both steps run, and every failure is returned.
func (k *Kubernetes) Destroy(ctx context.Context) error {
	var errs *multierror.Error
	if _, err := runs.Teardown(ctx, k.o.Run.Dir, runs.TeardownOptions{Targets: []string{k.name}, Log: k.o.Log}); err != nil {
		errs = multierror.Append(errs, err)
	}
	if !k.touched() {
		return errs.ErrorOrNil() // never reached a cluster
	}
	c, err := connect(k.cfg)
	if err != nil {
		return multierror.Append(errs, err).ErrorOrNil()
	}
	rs, err := c.labelled(ctx, k.o.Run.ID, k.name)
	if err != nil {
		return multierror.Append(errs, err).ErrorOrNil()
	}
	for _, r := range rs {
		if err := c.remove(ctx, r.Key); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: %w", r, err))
		}
	}
	return errs.ErrorOrNil()
}

// Inventory lists what of the run the target holds: ledger entries that
// still exist, and pods and NetworkPolicies labelled with the run.
func (k *Kubernetes) Inventory(ctx context.Context) ([]runs.Resource, error) {
	out, err := k.o.Run.Held(ctx, k.name)
	if err != nil {
		return nil, err
	}
	if !k.touched() {
		return out, nil
	}
	c, err := connect(k.cfg)
	if err != nil {
		return nil, err
	}
	rs, err := c.labelled(ctx, k.o.Run.ID, k.name)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range out {
		seen[string(r.Kind)+" "+r.Key] = true
		if r.Kind == manifests.ResourceContainer { // a Sandbox: its pod, its agent-sandbox Sandbox, or its claim
			for _, res := range []string{resPods, kubeengine.SandboxResource.Resource, kubeengine.SandboxClaimResource.Resource} {
				seen[string(manifests.ResourceKubeObject)+" "+objectKey(res, k.cfg.Namespace, kubeengine.PodName(r.Key))] = true
			}
		}
	}
	for _, r := range rs {
		if !seen[string(r.Kind)+" "+r.Key] {
			out = append(out, r)
		}
	}
	return out, nil
}

// recordFile is the record of the run's target named target in the run
// directory (kubernetes.json): beside the target's directory, not in it,
// so that it outlives the target's Destroy for as long as the run's
// ledger names what it reached.
func recordFile(target string) string { return target + ".json" }

// writeRecord writes what reaches the cluster, for teardown and the
// audit: the kube-engine's configuration.
func writeRecord(dir, target string, c kubeengine.Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, recordFile(target)+".new")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, recordFile(target)))
}

// readRecord reads the record of the run in runDir's target; ok is false
// when it has none (it never reached a cluster).
func readRecord(runDir, target string) (c kubeengine.Config, ok bool, err error) {
	if !manifests.ValidTargetName(target) {
		return c, false, nil
	}
	b, err := os.ReadFile(filepath.Join(runDir, recordFile(target)))
	if errors.Is(err, os.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, false, fmt.Errorf("reading %s: %w", filepath.Join(runDir, recordFile(target)), err)
	}
	return c, true, nil
}

// contextNamespace is the namespace of the kubeconfig context f names (its
// --kube-context, else the current one), as kubectl takes it when no
// --namespace is given; DefaultNamespace when the context sets none, or
// there is no kubeconfig to read (reaching the cluster then says why).
func contextNamespace(f Flags) string {
	ns, _, err := kubeengine.ClientConfig(kubeengine.Config{Kubeconfig: f.Kubeconfig, Context: f.Context}).Namespace()
	if err != nil || ns == "" {
		return DefaultNamespace
	}
	return ns
}
