//go:build kubetest

package kubernetes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	state := t.TempDir()
	run, err := runs.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	k := newTargetWith(t, c, run, "", "", kubetest.GVisorRuntimeClass, true)
	if k.Name() != kubernetes.AgentSandboxName {
		t.Errorf("the target is named %q, want %q", k.Name(), kubernetes.AgentSandboxName)
	}
	if err := k.Create(ctx); err != nil {
		t.Fatal(err)
	}
	img := chrootImage(t, "sealbench/sandbox-test:kube", "sh")
	if err := k.InstallImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	id, err := k.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
	audit, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range audit.Leftovers {
		t.Errorf("the audit after teardown finds %s", r)
	}
}
