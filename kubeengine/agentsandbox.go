package kubeengine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// agent-sandbox's API (sigs.k8s.io/agent-sandbox, agents.x-k8s.io/v1beta1
// and its extensions), reached through the dynamic client: its Go types
// would bring its own, newer, Kubernetes libraries.
var (
	SandboxResource         = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	SandboxTemplateResource = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	SandboxClaimResource    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	SandboxWarmPoolResource = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
)

// AgentSandboxResources are agent-sandbox's four kinds in the order they
// are removed in: a claim (with the Sandbox it holds) before its pool, a
// pool (with the Sandboxes it keeps) before its template, and Sandboxes
// last, so that no controller makes again what was just removed.
var AgentSandboxResources = []schema.GroupVersionResource{SandboxClaimResource, SandboxWarmPoolResource, SandboxTemplateResource, SandboxResource}

// SandboxObject is the agent-sandbox Sandbox whose pod is pod: its
// podTemplate is pod's metadata (labels, annotations: the container's
// record, so the pod the controller makes is found as kube-engine's own)
// and spec; the Sandbox carries the same labels and annotations, and no
// Service (the runner execs; nothing connects to a Sandbox).
func SandboxObject(pod *corev1.Pod) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod.Spec)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s's spec: %w", pod.Name, err)
	}
	meta := map[string]any{}
	if len(pod.Labels) > 0 {
		meta["labels"] = stringMap(pod.Labels)
	}
	if len(pod.Annotations) > 0 {
		meta["annotations"] = stringMap(pod.Annotations)
	}
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SandboxResource.GroupVersion().String(), "kind": "Sandbox",
		"spec": map[string]any{"podTemplate": map[string]any{"metadata": meta, "spec": spec}, "service": false},
	}}
	sb.SetName(pod.Name)
	sb.SetNamespace(pod.Namespace)
	sb.SetLabels(pod.Labels)
	sb.SetAnnotations(pod.Annotations)
	return sb, nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// SandboxReady is a Sandbox's Ready condition: whether it is True, and
// its reason and message.
func SandboxReady(sb *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(sb.Object, "status", "conditions")
	for _, v := range conds {
		m, _ := v.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True", fmt.Sprintf("Ready=%v (%v: %v)", m["status"], m["reason"], m["message"])
		}
	}
	return false, "no Ready condition yet"
}

// sandboxPodName is the pod a Sandbox runs: the one its annotation
// names (a Sandbox adopted from a warm pool), else the Sandbox's name.
func sandboxPodName(sb *unstructured.Unstructured) string {
	if n := sb.GetAnnotations()["agents.x-k8s.io/pod-name"]; n != "" {
		return n
	}
	return sb.GetName()
}

// createSandbox creates the Sandbox whose pod is spec, in place of the
// pod itself (Config.AgentSandbox).
func (s *Server) createSandbox(ctx context.Context, spec *corev1.Pod) error {
	sb, err := SandboxObject(spec)
	if err != nil {
		return err
	}
	if _, err := s.dynamic.Resource(SandboxResource).Namespace(s.c.Namespace).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Sandbox %s/%s: %w", s.c.Namespace, spec.Name, err)
	}
	return nil
}

// waitSandboxReady waits until the Sandbox name is Ready, as agent-sandbox's
// controller says once its pod is, or says its pod has ended (a container
// whose command is done: started, as dockerd would say).
func (s *Server) waitSandboxReady(ctx context.Context, name string) error {
	sandboxes := s.dynamic.Resource(SandboxResource).Namespace(s.c.Namespace)
	for {
		sb, err := sandboxes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting Sandbox %s: %w", name, err)
		}
		ok, why := SandboxReady(sb)
		if ok || strings.Contains(why, "(PodSucceeded:") || strings.Contains(why, "(PodFailed:") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Sandbox %s/%s is not Ready: %s", s.c.Namespace, name, why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sandboxWhy is what the Sandbox name says of itself, for an error.
func (s *Server) sandboxWhy(ctx context.Context, name string) string {
	sb, err := s.dynamic.Resource(SandboxResource).Namespace(s.c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("Sandbox %s/%s: %v", s.c.Namespace, name, err)
	}
	_, why := SandboxReady(sb)
	return fmt.Sprintf("Sandbox %s/%s: %s", s.c.Namespace, name, why)
}

// DeleteSandbox deletes a Sandbox and, since a cluster's garbage
// collector may not run (or not yet), the pod it runs, at once; then
// waits until both are gone. A Sandbox already gone is no error.
func DeleteSandbox(ctx context.Context, dyn dynamic.Interface, pods PodDeleter, namespace, name string) error {
	sandboxes := dyn.Resource(SandboxResource).Namespace(namespace)
	pod := name
	if sb, err := sandboxes.Get(ctx, name, metav1.GetOptions{}); err == nil {
		pod = sandboxPodName(sb)
	}
	var errs []error
	if err := sandboxes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Sandbox %s/%s: %w", namespace, name, err))
	}
	errs = append(errs, pods(ctx, pod))
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(errs) == 0 || errors.Join(errs...) == nil {
		_, err := sandboxes.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Sandbox %s/%s is still there a minute after its deletion", namespace, name)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.Join(errs...)
}

// PodDeleter deletes a pod at once and waits until it is gone.
type PodDeleter func(ctx context.Context, name string) error

// IsSandboxPod says whether a pod is run by an agent-sandbox Sandbox.
func IsSandboxPod(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Sandbox" && strings.HasPrefix(o.APIVersion, SandboxResource.Group+"/") {
			return true
		}
	}
	return false
}
