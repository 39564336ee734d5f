package kubeengine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/sealbench/sealbench/manifests"
)

// Warm claims (Config.WarmPool). The way agent platforms hand out a
// sandbox fast: a SandboxWarmPool keeps WarmPool Sandboxes of one
// SandboxTemplate running, and a SandboxClaim on the pool adopts one of
// them (agent-sandbox's controller falls back to a cold Sandbox from the
// template when none is ready). A run's target has one pool and one
// template, both named WarmPoolName; the kube-engine makes them at the
// first start, from that container's pod, and the target records them in
// the run's ledger before the kube-engine starts (they are found and
// removed by teardown like the NetworkPolicy). A container is then a
// claim named PodName(its name) that carries its record (the annotation
// a pod carries otherwise) and its labels; its pod is whichever the
// claim's Sandbox runs. A container whose pod would differ from the
// template's (another image or command) is made a cold Sandbox, as
// without a pool.

// AnnotationPodSpec, on a SandboxTemplate the kube-engine made, is the
// SHA-256 of the pod spec it was made from (podSpecDigest): a container
// is claimed from the pool only when its pod would have the same.
const AnnotationPodSpec = "sealbench.dev/pod-spec-sha256"

// Labels agent-sandbox's controllers put on a Sandbox.
const (
	// LabelLaunchType says whether a Sandbox was adopted from a warm pool
	// ("warm") or created for its claim ("cold").
	LabelLaunchType = "agents.x-k8s.io/launch-type"
	// LaunchWarm is LabelLaunchType's value for an adopted Sandbox.
	LaunchWarm = "warm"
)

// WarmPoolName is the SandboxWarmPool (and its SandboxTemplate) of a
// run's target: a DNS label short enough that the pool's Sandboxes and
// pods (the name, '-' and five characters) are DNS labels too. A run id
// (20261207T093000-3f9a1c) has one capital, always T, and a target's
// name none: lowercasing keeps them apart.
func WarmPoolName(runID, target string) string {
	n := PodName(strings.ToLower("sealbench-" + runID + "-" + target))
	if len(n) <= 57 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:48] + "-" + hex.EncodeToString(sum[:4])
}

// podSpecDigest is the SHA-256 of a pod spec's JSON: what a container's
// pod is compared with the template's by.
func podSpecDigest(spec *corev1.PodSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// poolLabels are the labels of the run's pool, template and claims, and
// of the pool's pods: the run's and the target's (the NetworkPolicy
// selects the pods by the first; teardown and the audit find all by it).
func (s *Server) poolLabels() map[string]string {
	l := map[string]string{manifests.RunLabel: s.c.RunID}
	if s.c.Target != "" {
		l[LabelTarget] = s.c.Target
	}
	return l
}

// TemplateObject is the SandboxTemplate whose Sandboxes run pod's spec,
// labelled like pod but for the labels of one container (LabelID), with
// agent-sandbox's network management off (the target's NetworkPolicy
// already denies the pods every connection, and a managed template would
// give its pods public DNS servers).
func TemplateObject(name string, pod *corev1.Pod, labels map[string]string) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod.Spec)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s's spec: %w", pod.Name, err)
	}
	digest, err := podSpecDigest(&pod.Spec)
	if err != nil {
		return nil, err
	}
	podLabels := maps.Clone(pod.Labels)
	delete(podLabels, LabelID)
	t := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SandboxTemplateResource.GroupVersion().String(), "kind": "SandboxTemplate",
		"spec": map[string]any{
			"podTemplate":             map[string]any{"metadata": map[string]any{"labels": stringMap(podLabels)}, "spec": spec},
			"service":                 false,
			"networkPolicyManagement": "Unmanaged",
		},
	}}
	t.SetName(name)
	t.SetNamespace(pod.Namespace)
	t.SetLabels(labels)
	t.SetAnnotations(map[string]string{AnnotationPodSpec: digest})
	return t, nil
}

// WarmPoolObject is the SandboxWarmPool of replicas Sandboxes of the
// template of the same name.
func WarmPoolObject(name, namespace string, replicas int, labels map[string]string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SandboxWarmPoolResource.GroupVersion().String(), "kind": "SandboxWarmPool",
		"spec": map[string]any{"replicas": int64(replicas), "sandboxTemplateRef": map[string]any{"name": name}},
	}}
	p.SetName(name)
	p.SetNamespace(namespace)
	p.SetLabels(labels)
	return p
}

// ClaimObject is the SandboxClaim of a container on the pool: named and
// labelled as its pod would be, with its record in its annotations.
func ClaimObject(pool string, pod *corev1.Pod) *unstructured.Unstructured {
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SandboxClaimResource.GroupVersion().String(), "kind": "SandboxClaim",
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": pool}},
	}}
	c.SetName(pod.Name)
	c.SetNamespace(pod.Namespace)
	c.SetLabels(pod.Labels)
	c.SetAnnotations(pod.Annotations)
	return c
}

// ensurePool makes the run's template and pool from pod, unless this
// Server has made them already, and says whether pod is the template's:
// whether a claim on the pool gives this container its pod. A template
// another kube-engine of the run made (a teardown's) is taken as it is.
func (s *Server) ensurePool(ctx context.Context, pod *corev1.Pod) (bool, error) {
	want, err := podSpecDigest(&pod.Spec)
	if err != nil {
		return false, err
	}
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.poolDigest != "" {
		return s.poolDigest == want, nil
	}
	name := WarmPoolName(s.c.RunID, s.c.Target)
	tmpl, err := TemplateObject(name, pod, s.poolLabels())
	if err != nil {
		return false, err
	}
	templates := s.dynamic.Resource(SandboxTemplateResource).Namespace(s.c.Namespace)
	got, err := templates.Create(ctx, tmpl, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = templates.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("making the SandboxTemplate %s/%s: %w", s.c.Namespace, name, err)
	}
	pool := WarmPoolObject(name, s.c.Namespace, s.c.WarmPool, s.poolLabels())
	if _, err := s.dynamic.Resource(SandboxWarmPoolResource).Namespace(s.c.Namespace).Create(ctx, pool, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("making the SandboxWarmPool %s/%s: %w", s.c.Namespace, name, err)
	}
	s.poolDigest = got.GetAnnotations()[AnnotationPodSpec]
	return s.poolDigest == want, nil
}

// claim makes the container's claim on the run's pool and waits until
// its Sandbox is Ready (StartLimit at most, as for a pod): it returns the
// Sandbox's name and its pod's.
func (s *Server) claim(ctx context.Context, pod *corev1.Pod) (sandbox, podName string, err error) {
	limit := cmp.Or(s.c.StartTimeout, StartLimit)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	claims := s.dynamic.Resource(SandboxClaimResource).Namespace(s.c.Namespace)
	if _, err := claims.Create(ctx, ClaimObject(WarmPoolName(s.c.RunID, s.c.Target), pod), metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("making the SandboxClaim %s/%s: %w", s.c.Namespace, pod.Name, err)
	}
	for {
		c, err := claims.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return "", "", fmt.Errorf("getting the SandboxClaim %s/%s: %w", s.c.Namespace, pod.Name, err)
		}
		ready, why := SandboxReady(c)
		if name := claimedSandbox(c); ready && name != "" {
			sb, err := s.dynamic.Resource(SandboxResource).Namespace(s.c.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", "", fmt.Errorf("getting the Sandbox %s/%s of claim %s: %w", s.c.Namespace, name, pod.Name, err)
			}
			return name, sandboxPodName(sb), nil
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("the SandboxClaim %s/%s was not Ready within %s: %s", s.c.Namespace, pod.Name, limit, why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// claimedSandbox is the Sandbox a claim's status names; "" before it
// names one.
func claimedSandbox(claim *unstructured.Unstructured) string {
	n, _, _ := unstructured.NestedString(claim.Object, "status", "sandbox", "name")
	return n
}

// claimed finds the container a claim named PodName(ref) holds: its
// record, and the pod its Sandbox runs ("" before it runs one).
func (s *Server) claimed(ctx context.Context, ref string) (rec containerRecord, pod string, ok bool, err error) {
	c, err := s.dynamic.Resource(SandboxClaimResource).Namespace(s.c.Namespace).Get(ctx, PodName(ref), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return rec, "", false, nil
	}
	if err != nil {
		return rec, "", false, fmt.Errorf("getting the SandboxClaim %s: %w", PodName(ref), err)
	}
	rec, ok = recordIn(c.GetAnnotations())
	if !ok || rec.Name != ref {
		return rec, "", false, nil
	}
	if name := claimedSandbox(c); name != "" {
		sb, err := s.dynamic.Resource(SandboxResource).Namespace(s.c.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return rec, "", false, fmt.Errorf("getting the Sandbox %s of claim %s: %w", name, PodName(ref), err)
		}
		if err == nil {
			pod = sandboxPodName(sb)
		}
	}
	return rec, pod, true, nil
}

// DeleteClaim deletes a SandboxClaim and the Sandbox it holds, with its
// pod (DeleteSandbox: no garbage collector need run), and waits until
// the claim is gone. A claim already gone is no error.
func DeleteClaim(ctx context.Context, dyn dynamic.Interface, pods PodDeleter, namespace, name string) error {
	claims := dyn.Resource(SandboxClaimResource).Namespace(namespace)
	c, err := claims.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting SandboxClaim %s/%s: %w", namespace, name, err)
	}
	if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting SandboxClaim %s/%s: %w", namespace, name, err)
	}
	var errs []error
	if sb := claimedSandbox(c); sb != "" {
		errs = append(errs, DeleteSandbox(ctx, dyn, pods, namespace, sb))
	}
	errs = append(errs, waitGone(ctx, "SandboxClaim "+namespace+"/"+name, func(ctx context.Context) error {
		_, err := claims.Get(ctx, name, metav1.GetOptions{})
		return err
	}))
	return errors.Join(errs...)
}

// DeleteWarmPool deletes a SandboxWarmPool, waits until it is gone (so
// that it makes no Sandbox again), then deletes the Sandboxes it still
// controls, each with its pod. A pool already gone is no error; its
// Sandboxes are then found by their owner's name.
func DeleteWarmPool(ctx context.Context, dyn dynamic.Interface, pods PodDeleter, namespace, name string) error {
	pools := dyn.Resource(SandboxWarmPoolResource).Namespace(namespace)
	if err := pools.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting SandboxWarmPool %s/%s: %w", namespace, name, err)
	}
	if err := waitGone(ctx, "SandboxWarmPool "+namespace+"/"+name, func(ctx context.Context) error {
		_, err := pools.Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	list, err := dyn.Resource(SandboxResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Sandboxes of SandboxWarmPool %s/%s: %w", namespace, name, err)
	}
	var errs []error
	for _, sb := range list.Items {
		if o := metav1.GetControllerOf(&sb); o != nil && o.Kind == "SandboxWarmPool" && o.Name == name {
			errs = append(errs, DeleteSandbox(ctx, dyn, pods, namespace, sb.GetName()))
		}
	}
	return errors.Join(errs...)
}

// waitGone polls get until it answers NotFound, for a minute at most.
func waitGone(ctx context.Context, what string, get func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%s is still there a minute after its deletion: %w", what, err)
			}
			return fmt.Errorf("%s is still there a minute after its deletion", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
