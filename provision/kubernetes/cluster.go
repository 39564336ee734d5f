package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// cluster is a connection to a cluster's API server.
type cluster struct {
	cs   kubernetes.Interface
	dyn  dynamic.Interface // agent-sandbox's kinds
	host string            // the API server's URL, for messages
}

// connect reaches the cluster c names (its kubeconfig and context, or
// client-go's defaults: KUBECONFIG, then ~/.kube/config).
func connect(c kubeengine.Config) (*cluster, error) {
	rc, err := kubeengine.RESTConfig(c)
	if err != nil {
		return nil, &provision.InputError{Err: fmt.Errorf("no cluster to reach: %w", err),
			Hint: "name a kubeconfig with --kubeconfig (or KUBECONFIG), and a context in it with --kube-context"}
	}
	rc.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &cluster{cs: cs, dyn: dyn, host: rc.Host}, nil
}

// The resources the run makes through the API server, as their ledger
// keys (manifests.ResourceKubeObject) name them.
const (
	resPods            = "pods"
	resNetworkPolicies = "networkpolicies"
	// A node's Lease (kubeengine.LeaseName) is the kube-engine's, taken
	// and released with the run's pods; only the audit names one, when a
	// kube-engine that died left it.
	resLeases = "leases"
)

func objectKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

func parseObjectKey(key string) (resource, namespace, name string, err error) {
	parts := strings.Split(key, "/")
	_, sandboxKind := agentSandboxKinds[parts[0]]
	if len(parts) != 3 || (parts[0] != resPods && parts[0] != resNetworkPolicies && parts[0] != resLeases && !sandboxKind) {
		return "", "", "", fmt.Errorf("%q is not a pod, NetworkPolicy, Lease or agent-sandbox object of a run (pods/NAMESPACE/NAME, networkpolicies/NAMESPACE/NAME, leases/NAMESPACE/NAME, sandboxes/NAMESPACE/NAME, ...)", key)
	}
	return parts[0], parts[1], parts[2], nil
}

// labelled lists the pods, NetworkPolicies, agent-sandbox objects and node Leases, in every
// namespace, that carry the run label: with the value run, or any value
// when run is "". With a target, only that target's pods and
// NetworkPolicies (kubeengine.LabelTarget), and no Lease: a node's Lease
// is the run's on that node, which its kube-engines release with the
// run's last pod there; only the audit, which asks for no target, lists
// one that a dead kube-engine left.
func (c *cluster) labelled(ctx context.Context, run, target string) ([]runs.Resource, error) {
	sel := manifests.RunLabel
	if run != "" {
		sel += "=" + run
	}
	if target != "" {
		sel += "," + kubeengine.LabelTarget + "=" + target
	}
	opts := metav1.ListOptions{LabelSelector: sel}
	pods, err := c.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing pods labelled %s on %s: %w", manifests.RunLabel, c.host, err)
	}
	nps, err := c.cs.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing NetworkPolicies labelled %s on %s: %w", manifests.RunLabel, c.host, err)
	}
	// agent-sandbox's objects first: removing one removes the pods it
	// runs, which removed first its controllers would make again.
	out, err := c.labelledSandboxes(ctx, sel)
	if err != nil {
		return nil, err
	}
	leases := &coordinationv1.LeaseList{}
	if target == "" {
		if leases, err = c.cs.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, opts); err != nil {
			return nil, fmt.Errorf("listing Leases labelled %s on %s: %w", manifests.RunLabel, c.host, err)
		}
	}
	for _, l := range leases.Items {
		out = append(out, runs.Resource{Target: Name, Run: l.Labels[manifests.RunLabel], Kind: manifests.ResourceKubeObject,
			Key: objectKey(resLeases, l.Namespace, l.Name), Detail: "a node's Lease on " + c.host + leaseState(l.Spec)})
	}
	for _, p := range pods.Items {
		out = append(out, runs.Resource{Target: Name, Run: p.Labels[manifests.RunLabel], Kind: manifests.ResourceKubeObject,
			Key: objectKey(resPods, p.Namespace, p.Name), Detail: "pod on node " + p.Spec.NodeName + ", " + string(p.Status.Phase) + ", on " + c.host})
	}
	for _, np := range nps.Items {
		out = append(out, runs.Resource{Target: Name, Run: np.Labels[manifests.RunLabel], Kind: manifests.ResourceKubeObject,
			Key: objectKey(resNetworkPolicies, np.Namespace, np.Name), Detail: "NetworkPolicy on " + c.host})
	}
	return out, nil
}

// exists reports whether the object key names is there.
func (c *cluster) exists(ctx context.Context, key string) (bool, string, error) {
	res, ns, name, err := parseObjectKey(key)
	if err != nil {
		return false, "", err
	}
	if r, ok := agentSandboxKinds[res]; ok {
		return c.existsSandboxObject(ctx, r, ns, name)
	}
	switch res {
	case resPods:
		p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return true, "pod, " + string(p.Status.Phase) + ", on " + c.host, nil
		}
		return false, "", notFound(err)
	case resLeases:
		l, err := c.cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return true, "a node's Lease on " + c.host + leaseState(l.Spec), nil
		}
		return false, "", notFound(err)
	default:
		_, err := c.cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return true, "NetworkPolicy on " + c.host, nil
		}
		return false, "", notFound(err)
	}
}

// notFound is nil for a NotFound error: absent is what teardown wants.
func notFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// remove deletes the object key names, and returns nil when it is not
// there; a pod is waited for until it is gone (its containers stopped).
func (c *cluster) remove(ctx context.Context, key string) error {
	res, ns, name, err := parseObjectKey(key)
	if err != nil {
		return err
	}
	if r, ok := agentSandboxKinds[res]; ok {
		return c.removeSandboxObject(ctx, r, ns, name)
	}
	switch res {
	case resNetworkPolicies:
		return notFound(c.cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	case resLeases:
		return notFound(c.cs.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	}
	zero := int64(0)
	if err := c.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return notFound(err)
	}
	for {
		_, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s/%s is still there: %w", ns, name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// leaseState says who holds a Lease and since when it was last renewed.
func leaseState(s coordinationv1.LeaseSpec) string {
	if s.HolderIdentity == nil || s.RenewTime == nil {
		return ""
	}
	return fmt.Sprintf(", held by %s, renewed %s ago", *s.HolderIdentity, time.Since(s.RenewTime.Time).Round(time.Second))
}
