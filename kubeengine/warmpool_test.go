package kubeengine

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sealbench/sealbench/manifests"
)

// TestWarmPoolName: a pool's name is a DNS label that leaves room for
// the five characters and '-' its Sandboxes' and pods' names add, and
// two runs' or targets' pools never share one.
func TestWarmPoolName(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range [][2]string{{"20261207T093000-3f9a1c", "agent-sandbox-warm"}, {"20261207T093000-3f9a1d", "agent-sandbox-warm"},
		{"20261207T093000-3f9a1c", "agent-sandbox-warm-on-a-node-with-a-long-name"}, {"20261207T093000-3f9a1c", "agent-sandbox-warm-on-a-node-with-a-long-nam"}} {
		n := WarmPoolName(c[0], c[1])
		if len(n) > 57 || PodName(n) != n {
			t.Errorf("WarmPoolName(%q, %q) = %q: not a DNS label of 57 characters at most", c[0], c[1], n)
		}
		if seen[n] {
			t.Errorf("WarmPoolName(%q, %q) = %q, as another run's or target's", c[0], c[1], n)
		}
		seen[n] = true
	}
	if n := WarmPoolName("20261207T093000-3f9a1c", "agent-sandbox-warm"); n != "sealbench-20261207t093000-3f9a1c-agent-sandbox-warm" {
		t.Errorf("a short name became %q", n)
	}
}

// TestWarmPoolObjects: the template carries the pod's spec and every
// label of the pod but the one container's id, says which spec it was
// made from, and leaves the network to the target; the claim names the
// pool and carries the container's record and labels; only a pod of
// the same spec matches the template.
func TestWarmPoolObjects(t *testing.T) {
	s := &Server{c: Config{Namespace: "ns", Node: "n1", FUSEResource: "sealbench.dev/fuse", RunID: "r1", Target: "agent-sandbox-warm", AgentSandbox: true, WarmPool: 2}}
	pod := func(name string, cmd ...string) *corev1.Pod {
		rec := containerRecord{ID: strings.Repeat("ab", 32), Name: name, Config: &container.Config{Image: "sha256:" + strings.Repeat("1", 64), Cmd: cmd,
			Labels: map[string]string{manifests.RunLabel: "r1"}}, HostConfig: &container.HostConfig{NetworkMode: "none"}}
		p, err := s.podSpec(rec)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := pod("sealbench-r1-a", "sleep", "infinity")
	tmpl, err := TemplateObject("pool", a, s.poolLabels())
	if err != nil {
		t.Fatal(err)
	}
	labels, _, _ := unstructured.NestedStringMap(tmpl.Object, "spec", "podTemplate", "metadata", "labels")
	if labels[manifests.RunLabel] != "r1" || labels[LabelTarget] != "agent-sandbox-warm" || labels[LabelID] != "" {
		t.Errorf("the template's pod labels %v: want the run's and the target's, not a container's id", labels)
	}
	if m, _, _ := unstructured.NestedString(tmpl.Object, "spec", "networkPolicyManagement"); m != "Unmanaged" {
		t.Errorf("networkPolicyManagement %q, want Unmanaged", m)
	}
	if node, _, _ := unstructured.NestedString(tmpl.Object, "spec", "podTemplate", "spec", "nodeName"); node != "n1" {
		t.Errorf("the template's pod spec names node %q, want n1", node)
	}
	da, _ := podSpecDigest(&a.Spec)
	if tmpl.GetAnnotations()[AnnotationPodSpec] != da || tmpl.GetLabels()[manifests.RunLabel] != "r1" {
		t.Errorf("the template's annotations %v, labels %v", tmpl.GetAnnotations(), tmpl.GetLabels())
	}
	if db, _ := podSpecDigest(&pod("sealbench-r1-b", "sleep", "infinity").Spec); db != da {
		t.Error("two containers of one spec, but for their names, have pods of different specs")
	}
	if dc, _ := podSpecDigest(&pod("sealbench-r1-c", "sleep", "600").Spec); dc == da {
		t.Error("a container of another command matches the template")
	}
	cl := ClaimObject("pool", a)
	if ref, _, _ := unstructured.NestedString(cl.Object, "spec", "warmPoolRef", "name"); ref != "pool" || cl.GetName() != a.Name || cl.GetNamespace() != "ns" {
		t.Errorf("the claim %s/%s names pool %q", cl.GetNamespace(), cl.GetName(), ref)
	}
	if rec, ok := recordIn(cl.GetAnnotations()); !ok || rec.Name != "sealbench-r1-a" || cl.GetLabels()[LabelID] == "" {
		t.Errorf("the claim's record %+v (%v), labels %v: want the container's", rec, ok, cl.GetLabels())
	}
	p := WarmPoolObject("pool", "ns", 2, s.poolLabels())
	if n, _, _ := unstructured.NestedInt64(p.Object, "spec", "replicas"); n != 2 {
		t.Errorf("the pool keeps %d Sandboxes, want 2", n)
	}
	if ref, _, _ := unstructured.NestedString(p.Object, "spec", "sandboxTemplateRef", "name"); ref != "pool" {
		t.Errorf("the pool's template is %q", ref)
	}
}
