//go:build linux && kubetest

package kubetest

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestGVisorRuntimeClass: a pod of the RuntimeClass gvisor runs under
// gVisor (its kernel is gVisor's, not this host's; containerd ran it
// with the runsc shim), sees /dev/fuse (gVisor's own), has only lo, and
// goes with everything of it when deleted.
func TestGVisorRuntimeClass(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := c.Client.NodeV1().RuntimeClasses().Get(ctx, GVisorRuntimeClass, metav1.GetOptions{})
	if err != nil || rc.Handler != GVisorHandler {
		t.Fatalf("the RuntimeClass %s: %+v, %v; want handler %s", GVisorRuntimeClass, rc, err, GVisorHandler)
	}
	pods := c.Client.CoreV1().Pods("default")
	p := fusePod("gvisor")
	p.Spec.RuntimeClassName = &rc.Name
	t0 := time.Now()
	pod, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pods.Delete(context.Background(), pod.Name, *metav1.NewDeleteOptions(0)) })
	if pod, err = waitPod(ctx, c, pod.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
		t.Fatal(err)
	}
	t.Logf("gVisor pod running %s after its creation", time.Since(t0).Round(time.Millisecond))
	host, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := c.Exec(ctx, "default", pod.Name, "main", "sh", "-c",
		`uname -r; exec 3<>/dev/fuse && echo opened /dev/fuse; sed 1,2d /proc/net/dev | cut -d: -f1`)
	if err != nil {
		t.Fatalf("exec: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	t.Logf("in the gVisor pod:\n%s", out)
	lines := strings.Fields(out)
	if len(lines) < 3 || lines[0] == strings.TrimSpace(string(host)) || !strings.Contains(lines[0], "gvisor") {
		t.Errorf("the pod's kernel is %q (this host's is %s): not gVisor's", lines, host)
	}
	// gVisor's own FUSE device, and no interface but lo (network none).
	if len(lines) < 3 || strings.Join(lines[1:3], " ") != "opened /dev/fuse" || len(lines) > 4 || len(lines) == 4 && lines[3] != "lo" {
		t.Errorf("the gVisor pod says %q: want /dev/fuse opened and no interface but lo", out)
	}
	info, err := c.ctr("containers", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), "io.containerd.runsc.v1") {
		t.Errorf("containerd's containers:\n%s\nwant one run by io.containerd.runsc.v1", info)
	}
	if err := pods.Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		out, cerr := c.ctr("tasks", "ls", "-q")
		if apierrors.IsNotFound(err) && cerr == nil && len(bytes.TrimSpace(out)) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the gVisor pod after its deletion: %v; tasks %s %v", err, out, cerr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sandboxResource is agent-sandbox's Sandbox.
var sandboxResource = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// TestAgentSandboxControllerRuns: the cluster serves agent-sandbox's four
// kinds, and its controller makes a Sandbox's pod from the Sandbox's pod
// template and reports the Sandbox Ready once the pod is; the pod is
// exec'd into.
func TestAgentSandboxControllerRuns(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range []schema.GroupVersionResource{sandboxResource,
		{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}} {
		if _, err := c.Dynamic.Resource(r).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("listing %s: %v", r.Resource, err)
		}
	}
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "kubetest-sandbox", "namespace": "default"},
		"spec": map[string]any{"podTemplate": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"sealbench.test": "kubetest"}},
			"spec": map[string]any{
				"nodeName": NodeName, "automountServiceAccountToken": false, "restartPolicy": "Never",
				"terminationGracePeriodSeconds": 0,
				"containers": []any{map[string]any{"name": "main", "image": BusyboxImage, "imagePullPolicy": "Never",
					"command": []any{"sleep", "3600"}}},
			}}}}}
	sandboxes := c.Dynamic.Resource(sandboxResource).Namespace("default")
	t0 := time.Now()
	if _, err := sandboxes.Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := c.Client.CoreV1().Pods("default")
	t.Cleanup(func() {
		sandboxes.Delete(context.Background(), "kubetest-sandbox", metav1.DeleteOptions{})
		// No garbage collector runs here: the Sandbox's pod goes by hand.
		pods.Delete(context.Background(), "kubetest-sandbox", *metav1.NewDeleteOptions(0))
	})
	var ready bool
	for !ready {
		got, err := sandboxes.Get(ctx, "kubetest-sandbox", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, v := range conds {
			if m, _ := v.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				ready = true
			}
		}
		if !ready && ctx.Err() != nil {
			t.Fatalf("the Sandbox is not Ready: %v", conds)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("Sandbox Ready %s after its creation", time.Since(t0).Round(time.Millisecond))
	pod, err := pods.Get(ctx, "kubetest-sandbox", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Kind != "Sandbox" {
		t.Errorf("the Sandbox's pod is owned by %+v, want the Sandbox", pod.OwnerReferences)
	}
	if out, stderr, err := c.Exec(ctx, "default", pod.Name, "main", "echo", "hello"); err != nil || out != "hello\n" {
		t.Errorf("exec in the Sandbox's pod: %q %q %v", out, stderr, err)
	}
}
