//go:build kubetest

package kubernetes_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/kubetest"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/kubernetes"
	"github.com/sealbench/sealbench/runs"
)

// TestAgentSandboxSandboxIsASandbox: on the agent-sandbox target a
// Sandbox is an agent-sandbox Sandbox, labelled with the run, Ready,
// running a pod that the controller made and the Sandbox owns, under the
// RuntimeClass asked for; the pins name agent-sandbox's version and the
// RuntimeClass; an exec reaches the pod; and teardown, without the run's
// kube-engine, removes the Sandbox and its pod, after which the audit
// finds nothing of the run.
func TestAgentSandboxSandboxIsASandbox(t *testing.T) {
	c := kubetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	state, run, k := newRunTarget(t, c, kubernetes.Options{RuntimeClass: kubetest.GVisorRuntimeClass, AgentSandbox: true})
	if k.Name() != kubernetes.AgentSandboxName {
		t.Errorf("the target is named %q, want %q", k.Name(), kubernetes.AgentSandboxName)
	}
	if err := k.Create(ctx); err != nil {
		t.Fatal(err)
	}
	img, id := installTestImage(ctx, t, k)
	p := id.Pins()
	if p.AgentSandbox != kubetest.AgentSandboxVersion+" (agents.x-k8s.io/v1beta1)" || p.Runtime != kubetest.GVisorRuntimeClass ||
		p.RuntimeHandler != kubetest.GVisorHandler || p.FUSE != manifests.FUSEGVisor {
		t.Errorf("pins %+v: want agent-sandbox %s, RuntimeClass %s (handler %s), gVisor's FUSE", p, kubetest.AgentSandboxVersion, kubetest.GVisorRuntimeClass, kubetest.GVisorHandler)
	}
	cli, err := engine.NewClient(k.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	t0 := time.Now()
	cid, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: k.Name(), Endpoint: k.Endpoint(),
		Runtime: p.Runtime, Image: img.ID, Name: "as", Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, cid, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the Sandbox was Ready %s after its create", time.Since(t0).Round(time.Millisecond))
	name := kubeengine.PodName(engine.SandboxName(run.ID, "as"))
	sb, err := c.Dynamic.Resource(kubeengine.SandboxResource).Namespace("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Sandbox object: %v", err)
	}
	if ok, why := kubeengine.SandboxReady(sb); !ok || sb.GetLabels()[manifests.RunLabel] != run.ID {
		t.Errorf("Sandbox %s: %s, labels %v; want Ready, labelled with run %s", name, why, sb.GetLabels(), run.ID)
	}
	pod, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !kubeengine.IsSandboxPod(pod) || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != kubetest.GVisorRuntimeClass {
		t.Errorf("pod %s: owners %+v, RuntimeClass %v; want the Sandbox's, under %s", name, pod.OwnerReferences, pod.Spec.RuntimeClassName, kubetest.GVisorRuntimeClass)
	}
	out, stderr, err := c.Exec(ctx, "default", name, "sandbox", "sh", "-c", "uname -r")
	if err != nil || !strings.Contains(out, "gvisor") {
		t.Errorf("uname -r in the Sandbox: %q %q %v; want gVisor's", out, stderr, err)
	}
	// Teardown removes the Sandbox and its pod through a kube-engine of
	// its own: the run's is gone first, as after a crash.
	run.Close()
	if _, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{Log: t.Logf}); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	if _, err := c.Dynamic.Resource(kubeengine.SandboxResource).Namespace("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Sandbox after teardown: %v, want it gone", err)
	}
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Sandbox's pod after teardown: %v, want it gone", err)
	}
	auditClean(ctx, t, state, run.ID)
}

// TestAgentSandboxWarmClaims: on the agent-sandbox-warm target a
// Sandbox is a SandboxClaim on the run's SandboxWarmPool, which the
// kube-engine makes at the first start and the ledger names before; once
// the pool has a ready Sandbox, the next claim adopts it (launch type
// warm) and an exec through the Engine reaches its pod; removing a
// Sandbox removes its claim, its Sandbox and its pod; teardown, without
// the run's kube-engine, removes the rest, the pool's own Sandboxes
// included, and the audit then finds nothing of the run.
func TestAgentSandboxWarmClaims(t *testing.T) {
	c := kubetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	state, run, k := newRunTarget(t, c, kubernetes.Options{AgentSandbox: true, WarmPool: 1})
	if k.Name() != kubernetes.AgentSandboxWarmName {
		t.Errorf("the target is named %q, want %q", k.Name(), kubernetes.AgentSandboxWarmName)
	}
	if err := k.Create(ctx); err != nil {
		t.Fatal(err)
	}
	pool := kubeengine.WarmPoolName(run.ID, k.Name())
	var keys []string
	for _, e := range run.Ledger.Entries() {
		if e.Kind == manifests.ResourceKubeObject {
			keys = append(keys, e.Key)
		}
	}
	if !slices.Contains(keys, "sandboxtemplates/default/"+pool) || !slices.Contains(keys, "sandboxwarmpools/default/"+pool) {
		t.Errorf("the ledger's cluster objects %q: want the pool %s and its template", keys, pool)
	}
	img, id := installTestImage(ctx, t, k)
	if p := id.Pins(); p.WarmPool != 1 || p.AgentSandbox == "" {
		t.Errorf("pins: agent-sandbox %q, warm pool %d; want agent-sandbox's version and a pool of 1", p.AgentSandbox, p.WarmPool)
	}
	cli, err := engine.NewClient(k.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	start := func(name string) string {
		t.Helper()
		cid, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: k.Name(), Endpoint: k.Endpoint(),
			Image: img.ID, Name: name, Cmd: []string{"sleep", "infinity"}})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if err := cli.ContainerStart(ctx, cid, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("Sandbox %s started %s after its start was asked", name, time.Since(t0).Round(time.Millisecond))
		return cid
	}
	// claimedSandbox is the Sandbox the claim of Sandbox name holds.
	claimedSandbox := func(name string) (claim, sandbox string, launch string) {
		t.Helper()
		claim = kubeengine.PodName(engine.SandboxName(run.ID, name))
		cl, err := c.Dynamic.Resource(kubeengine.SandboxClaimResource).Namespace("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the claim of Sandbox %s: %v", name, err)
		}
		sandbox, _, _ = unstructured.NestedString(cl.Object, "status", "sandbox", "name")
		sb, err := c.Dynamic.Resource(kubeengine.SandboxResource).Namespace("default").Get(ctx, sandbox, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Sandbox %q of claim %s: %v", sandbox, claim, err)
		}
		return claim, sandbox, sb.GetLabels()[kubeengine.LabelLaunchType]
	}
	start("first") // makes the pool; its own claim may find none ready
	if err := waitPoolReady(ctx, c.Dynamic.Resource(kubeengine.SandboxWarmPoolResource).Namespace("default"), pool); err != nil {
		t.Fatal(err)
	}
	second := start("second")
	claim, sandbox, launch := claimedSandbox("second")
	if launch != kubeengine.LaunchWarm || !strings.HasPrefix(sandbox, pool+"-") {
		t.Errorf("claim %s holds Sandbox %s, launch type %q: want one of pool %s, warm", claim, sandbox, launch, pool)
	}
	ex, err := cli.ContainerExecCreate(ctx, second, container.ExecOptions{Cmd: []string{"sh", "-c", "echo in-the-warm-sandbox"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out, stderr strings.Builder
	_, err = stdcopy.StdCopy(&out, &stderr, att.Reader)
	att.Close()
	if err != nil || out.String() != "in-the-warm-sandbox\n" {
		t.Errorf("an exec in the claimed Sandbox: %q %q %v", out.String(), stderr.String(), err)
	}
	if err := cli.ContainerRemove(ctx, second, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(kubeengine.SandboxClaimResource).Namespace("default").Get(ctx, claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claim after the Sandbox's removal: %v, want it gone", err)
	}
	if _, err := c.Dynamic.Resource(kubeengine.SandboxResource).Namespace("default").Get(ctx, sandbox, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed Sandbox after the removal: %v, want it gone", err)
	}
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, sandbox, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed Sandbox's pod after the removal: %v, want it gone", err)
	}
	// The first Sandbox, the pool (by now making a Sandbox again) and the
	// template are teardown's, the run's kube-engine gone first.
	run.Close()
	if _, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{Log: t.Logf}); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	for _, r := range []schema.GroupVersionResource{kubeengine.SandboxClaimResource, kubeengine.SandboxWarmPoolResource, kubeengine.SandboxTemplateResource, kubeengine.SandboxResource} {
		list, err := c.Dynamic.Resource(r).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			// The run's: labelled with it, or a Sandbox of its pool (labelled
			// by agent-sandbox's controller alone).
			if o.GetLabels()[manifests.RunLabel] == run.ID || strings.HasPrefix(o.GetName(), pool+"-") {
				t.Errorf("after teardown: %s %s", o.GetKind(), o.GetName())
			}
		}
	}
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: manifests.RunLabel + "=" + run.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("after teardown: pod %s", p.Name)
	}
	auditClean(ctx, t, state, run.ID)
}

// newRunTarget makes a run in a new state directory and the target o says
// in it, on the test cluster, which KUBECONFIG names (for teardown and the
// audit).
func newRunTarget(t *testing.T, c *kubetest.Cluster, o kubernetes.Options) (state string, run *runs.Run, k *kubernetes.Kubernetes) {
	t.Helper()
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	state = t.TempDir()
	run, err := runs.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	return state, run, newTargetOpts(t, c, run, o)
}

// auditClean fails the test for anything the audit of the run finds.
func auditClean(ctx context.Context, t *testing.T, state, run string) {
	t.Helper()
	audit, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range audit.Leftovers {
		t.Errorf("the audit after teardown finds %s", r)
	}
}

// installTestImage installs a test image (sh, over the chroot) on the
// target, and returns it with the target's identity.
func installTestImage(ctx context.Context, t *testing.T, k *kubernetes.Kubernetes) (engine.Image, *engine.Identity) {
	t.Helper()
	img := chrootImage(t, "sealbench/sandbox-test:kube", "sh")
	if err := k.InstallImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	id, err := k.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return img, id
}
