package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// AgentSandboxName is the agent-sandbox target's kind: the kubernetes
// target with each Sandbox an agent-sandbox Sandbox
// (`--target agent-sandbox[:RUNTIMECLASS][@NODE]`).
const AgentSandboxName = "agent-sandbox"

// AgentSandboxWarmName is the agent-sandbox-warm target's kind: the
// agent-sandbox target with each Sandbox claimed from a warm pool
// (`--target agent-sandbox-warm[:RUNTIMECLASS][@NODE]`).
const AgentSandboxWarmName = "agent-sandbox-warm"

// DefaultWarmPool is how many Sandboxes the agent-sandbox-warm target's
// pool keeps ready unless --kube-warm-pool says otherwise: one to claim,
// one more while the first is replaced.
const DefaultWarmPool = 2

// recordWarmPool records, before the kube-engine that makes them starts,
// the SandboxTemplate and SandboxWarmPool of the agent-sandbox-warm
// target (kubeengine.WarmPoolName): teardown removes the pool (with the
// Sandboxes it keeps) before the template, as the ledger is undone from
// its end.
func (k *Kubernetes) recordWarmPool() error {
	if k.cfg.WarmPool == 0 {
		return nil
	}
	name := kubeengine.WarmPoolName(k.o.Run.ID, k.name)
	own := map[string]string{manifests.RunLabel: k.o.Run.ID, kubeengine.LabelTarget: k.name}
	for _, o := range []struct {
		res    string
		detail string
	}{
		{kubeengine.SandboxTemplateResource.Resource, "the template of the warm pool's Sandboxes"},
		{kubeengine.SandboxWarmPoolResource.Resource, fmt.Sprintf("keeps %d Sandboxes ready to claim", k.cfg.WarmPool)},
	} {
		if err := k.record(manifests.LedgerEntry{Kind: manifests.ResourceKubeObject, Key: objectKey(o.res, k.cfg.Namespace, name), Labels: own, Detail: o.detail}); err != nil {
			return err
		}
	}
	return nil
}

// agentSandboxFix says how to get agent-sandbox onto a cluster.
const agentSandboxFix = "install agent-sandbox (sigs.k8s.io/agent-sandbox, v1.0.1 or later): its CRDs and its controller with --extensions, from its release manifests or Helm chart"

// versionLabel is the label Helm's charts (agent-sandbox's among them) put
// on what they install: the version installed.
const versionLabel = "app.kubernetes.io/version"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// agentSandboxVersion is what the cluster says of its agent-sandbox: the
// version of its controller's Deployment (the label Helm puts on it, or
// its image's tag), else its Sandbox CRD's version label, else
// "unknown"; with the API version it serves. A cluster that serves no
// Sandbox is refused, saying how to install one.
func agentSandboxVersion(ctx context.Context, c *cluster) (string, error) {
	gv := kubeengine.SandboxResource.GroupVersion().String()
	rl, err := c.cs.Discovery().ServerResourcesForGroupVersion(gv)
	served := false
	if err == nil {
		for _, r := range rl.APIResources {
			served = served || r.Name == kubeengine.SandboxResource.Resource
		}
	} else if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("asking the API server at %s for %s: %w", c.host, gv, err)
	}
	if !served {
		return "", &provision.InputError{Err: fmt.Errorf("the cluster at %s serves no agent-sandbox Sandbox (%s)", c.host, gv), Hint: agentSandboxFix}
	}
	version := "unknown"
	if ds, err := c.cs.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=agent-sandbox"}); err == nil {
		for _, d := range ds.Items {
			if v := d.Labels[versionLabel]; v != "" {
				version = v
				break
			}
			for _, ct := range d.Spec.Template.Spec.Containers {
				if i := strings.LastIndexByte(ct.Image, ':'); i > 0 && !strings.Contains(ct.Image[i:], "/") && strings.Contains(ct.Image, "agent-sandbox-controller") {
					version = ct.Image[i+1:]
				}
			}
		}
	}
	if version == "unknown" {
		if crd, err := c.dyn.Resource(crdResource).Get(ctx, kubeengine.SandboxResource.GroupResource().String(), metav1.GetOptions{}); err == nil {
			if v := crd.GetLabels()[versionLabel]; v != "" {
				version = v
			}
		}
	}
	return version + " (" + gv + ")", nil
}

// agentSandboxKinds are the ledger keys' resources of agent-sandbox's
// kinds, by resource name.
var agentSandboxKinds = func() map[string]schema.GroupVersionResource {
	m := map[string]schema.GroupVersionResource{}
	for _, r := range kubeengine.AgentSandboxResources {
		m[r.Resource] = r
	}
	return m
}()

// labelledSandboxes lists the agent-sandbox objects (SandboxClaims,
// SandboxWarmPools, SandboxTemplates, Sandboxes: the order they are
// removed in), in every namespace, that carry the run label (any value
// when run is ""), or only the target's; a Sandbox also when only its
// pod template carries it (a warm pool's, labelled by agent-sandbox's
// controller alone). A cluster that serves none of them has none.
func (c *cluster) labelledSandboxes(ctx context.Context, sel string) ([]runs.Resource, error) {
	match, err := labels.Parse(sel)
	if err != nil {
		return nil, err
	}
	var out []runs.Resource
	for _, r := range kubeengine.AgentSandboxResources {
		opts := metav1.ListOptions{LabelSelector: sel}
		if r == kubeengine.SandboxResource {
			opts.LabelSelector = ""
		}
		list, err := c.dyn.Resource(r).Namespace(metav1.NamespaceAll).List(ctx, opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s labelled %s on %s: %w", r.Resource, sel, c.host, err)
		}
		for _, o := range list.Items {
			l := o.GetLabels()
			if !match.Matches(labels.Set(l)) {
				if l, _, _ = unstructured.NestedStringMap(o.Object, "spec", "podTemplate", "metadata", "labels"); !match.Matches(labels.Set(l)) {
					continue
				}
			}
			out = append(out, runs.Resource{Target: AgentSandboxName, Run: l[manifests.RunLabel], Kind: manifests.ResourceKubeObject,
				Key: objectKey(r.Resource, o.GetNamespace(), o.GetName()), Detail: "agent-sandbox " + o.GetKind() + " on " + c.host})
		}
	}
	return out, nil
}

// existsSandboxObject reports whether the agent-sandbox object is there.
func (c *cluster) existsSandboxObject(ctx context.Context, r schema.GroupVersionResource, ns, name string) (bool, string, error) {
	o, err := c.dyn.Resource(r).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return true, "agent-sandbox " + o.GetKind() + " on " + c.host, nil
	}
	return false, "", notFound(err)
}

// removeSandboxObject deletes the agent-sandbox object; a Sandbox with
// its pod, a SandboxClaim with the Sandbox it holds, a SandboxWarmPool
// with the Sandboxes it keeps (no garbage collector need run), each
// waited for.
func (c *cluster) removeSandboxObject(ctx context.Context, r schema.GroupVersionResource, ns, name string) error {
	pods := func(ctx context.Context, pod string) error { return c.remove(ctx, objectKey(resPods, ns, pod)) }
	switch r {
	case kubeengine.SandboxResource:
		return kubeengine.DeleteSandbox(ctx, c.dyn, pods, ns, name)
	case kubeengine.SandboxClaimResource:
		return kubeengine.DeleteClaim(ctx, c.dyn, pods, ns, name)
	case kubeengine.SandboxWarmPoolResource:
		return kubeengine.DeleteWarmPool(ctx, c.dyn, pods, ns, name)
	}
	err := notFound(c.dyn.Resource(r).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	if err != nil {
		return errors.Join(fmt.Errorf("deleting %s %s/%s", r.Resource, ns, name), err)
	}
	return nil
}
