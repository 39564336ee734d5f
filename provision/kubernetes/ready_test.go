//go:build kubetest

package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sealbench/sealbench/internal/kubetest"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/runner/stats"
)

// readyPod is the pod every time-to-ready sample starts: busybox
// sleeping on the node, with /dev/fuse, under runtimeClass ("" the
// default).
func readyPod(name, runtimeClass string) *corev1.Pod {
	never, zero := false, int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"sealbench.test": "ready"}},
		Spec: corev1.PodSpec{
			NodeName: kubetest.NodeName, AutomountServiceAccountToken: &never, EnableServiceLinks: &never,
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &zero,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "sandbox", Image: kubetest.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubetest.FUSEResource: resource.MustParse("1")}}}},
		},
	}
	if runtimeClass != "" {
		p.Spec.RuntimeClassName = &runtimeClass
	}
	return p
}

// untilExec execs `true` in the pod until it succeeds (the pod may not
// exist or run yet).
func untilExec(ctx context.Context, c *kubetest.Cluster, pod string) error {
	for {
		_, _, err := c.Exec(ctx, "default", pod, "sandbox", "true")
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no exec in pod %s succeeded: %v", pod, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestTimeToUsableSandbox measures, on the test cluster, the time from
// asking for a Sandbox to the first exec in it that succeeds: a bare pod
// (the kubernetes target's), an agent-sandbox SandboxClaim on a
// SandboxWarmPool with no replicas (cold: the controller makes a Sandbox
// from the SandboxTemplate) and with ready replicas (warm: it adopts one),
// under runc and under gVisor. SEALBENCH_READY_SAMPLES samples of each
// (default 3), taken in turns; it logs each series' median with its
// bootstrap 95% interval, and fails only when a Sandbox never becomes
// usable.
func TestTimeToUsableSandbox(t *testing.T) {
	c := kubetest.Shared(t)
	n := 3
	if v, err := strconv.Atoi(os.Getenv("SEALBENCH_READY_SAMPLES")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dyn := c.Dynamic
	templates := dyn.Resource(kubeengine.SandboxTemplateResource).Namespace("default")
	pools := dyn.Resource(kubeengine.SandboxWarmPoolResource).Namespace("default")
	claims := dyn.Resource(kubeengine.SandboxClaimResource).Namespace("default")
	sandboxes := dyn.Resource(kubeengine.SandboxResource).Namespace("default")
	pods := c.Client.CoreV1().Pods("default")
	obj := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		gv := kubeengine.SandboxTemplateResource.GroupVersion().String()
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": gv, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"sealbench.test": "ready"}}, "spec": spec}}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		sel := metav1.ListOptions{LabelSelector: "sealbench.test=ready"}
		for _, r := range []interface {
			DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error
		}{claims, pools, templates} {
			r.DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		}
		// No garbage collector: every Sandbox and pod goes by hand.
		if list, err := sandboxes.List(ctx, sel); err == nil {
			for _, sb := range list.Items {
				kubeengine.DeleteSandbox(ctx, dyn, func(ctx context.Context, pod string) error {
					return pods.Delete(ctx, pod, *metav1.NewDeleteOptions(0))
				}, "default", sb.GetName())
			}
		}
		pods.DeleteCollection(ctx, *metav1.NewDeleteOptions(0), sel)
	})

	type series struct {
		name string
		take func(i int) (time.Duration, error)
	}
	var all []series
	for _, rc := range []string{"", kubetest.GVisorRuntimeClass} {
		label := "runc"
		if rc != "" {
			label = rc
		}
		tmpl := "ready-" + label
		p := readyPod("", rc)
		podSpec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := templates.Create(ctx, obj("SandboxTemplate", tmpl, map[string]any{
			"podTemplate": map[string]any{"metadata": map[string]any{"labels": map[string]any{"sealbench.test": "ready"}}, "spec": podSpec},
			"service":     false, "networkPolicyManagement": "Unmanaged"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, warm := range []bool{false, true} {
			pool, replicas := tmpl+"-cold", int64(0)
			if warm {
				pool, replicas = tmpl+"-warm", 1
			}
			if _, err := pools.Create(ctx, obj("SandboxWarmPool", pool, map[string]any{"replicas": replicas,
				"sandboxTemplateRef": map[string]any{"name": tmpl}}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, series{"pod, " + label + ", cold", func(i int) (time.Duration, error) {
			name := fmt.Sprintf("ready-pod-%s-%d", label, i)
			t0 := time.Now()
			if _, err := pods.Create(ctx, readyPod(name, rc), metav1.CreateOptions{}); err != nil {
				return 0, err
			}
			err := untilExec(ctx, c, name)
			d := time.Since(t0)
			pods.Delete(ctx, name, *metav1.NewDeleteOptions(0))
			return d, err
		}})
		for _, warm := range []bool{false, true} {
			pool, how := tmpl+"-cold", "cold"
			if warm {
				pool, how = tmpl+"-warm", "warm"
			}
			all = append(all, series{"agent-sandbox claim, " + label + ", " + how, func(i int) (time.Duration, error) {
				if warm {
					if err := waitPoolReady(ctx, pools, pool); err != nil {
						return 0, err
					}
				}
				name := fmt.Sprintf("ready-%s-%s-%d", label, how, i)
				t0 := time.Now()
				if _, err := claims.Create(ctx, obj("SandboxClaim", name, map[string]any{"warmPoolRef": map[string]any{"name": pool}}), metav1.CreateOptions{}); err != nil {
					return 0, err
				}
				var sbName string
				for sbName == "" {
					cl, err := claims.Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return 0, err
					}
					sbName, _, _ = unstructured.NestedString(cl.Object, "status", "sandbox", "name")
					if sbName == "" {
						if ctx.Err() != nil {
							return 0, fmt.Errorf("claim %s names no Sandbox: %v", name, cl.Object["status"])
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				sb, err := sandboxes.Get(ctx, sbName, metav1.GetOptions{})
				if err != nil {
					return 0, err
				}
				pod := sb.GetName()
				if p := sb.GetAnnotations()["agents.x-k8s.io/pod-name"]; p != "" {
					pod = p
				}
				err = untilExec(ctx, c, pod)
				d := time.Since(t0)
				claims.Delete(ctx, name, metav1.DeleteOptions{})
				kubeengine.DeleteSandbox(ctx, dyn, func(ctx context.Context, p string) error {
					err := pods.Delete(ctx, p, *metav1.NewDeleteOptions(0))
					if apierrors.IsNotFound(err) {
						return nil
					}
					return err
				}, "default", sbName)
				return d, err
			}})
		}
	}
	got := make([][]float64, len(all))
	for i := range n {
		for j, s := range all {
			d, err := s.take(i)
			if err != nil {
				t.Fatalf("%s, sample %d: %v", s.name, i, err)
			}
			got[j] = append(got[j], d.Seconds()*1000)
		}
	}
	for j, s := range all {
		iv, err := stats.BootstrapMedian(got[j], 0.95, stats.DefaultResamples, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("time to a usable sandbox, %s: median %.0f ms (95%% interval %.0f to %.0f ms, %d samples: %.0f)", s.name, stats.Median(got[j]), iv.Low, iv.High, n, got[j])
	}
}

// waitPoolReady waits until the warm pool has a ready replica.
func waitPoolReady(ctx context.Context, pools interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name string) error {
	for {
		p, err := pools.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r, _, _ := unstructured.NestedInt64(p.Object, "status", "readyReplicas"); r > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm pool %s has no ready replica: %v", name, p.Object["status"])
		case <-time.After(100 * time.Millisecond):
		}
	}
}
