//go:build linux

package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/sealbench/sealbench/internal/toolcache"
)

// AgentSandboxVersion is the version of sigs.k8s.io/agent-sandbox whose
// CRDs the cluster has and whose controller it runs (`make kube-tools`
// builds it).
const AgentSandboxVersion = toolcache.AgentSandboxVersion

// crdResource is apiextensions' CustomResourceDefinition, reached through
// the dynamic client (no apiextensions client is linked for four files).
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installRuntimeClass creates the RuntimeClass GVisorRuntimeClass, whose
// handler is containerd's runsc runtime (containerdConfig).
func (c *Cluster) installRuntimeClass(ctx context.Context) error {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: GVisorRuntimeClass}, Handler: GVisorHandler}
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the RuntimeClass %s: %w", GVisorRuntimeClass, err)
	}
	return nil
}

// installAgentSandbox creates agent-sandbox's CRDs (Sandbox,
// SandboxTemplate, SandboxClaim, SandboxWarmPool), waits until the API
// server serves them, and starts its controller against the API server,
// with its extensions (the controllers of the last three), no leader
// election, and no metrics or health ports.
func (c *Cluster) installAgentSandbox(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(c.tools.AgentSandboxCRDs, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (run `make kube-tools`)", c.tools.AgentSandboxCRDs)
	}
	crds := c.Dynamic.Resource(crdResource)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return fmt.Errorf("reading the CRD %s: %w", f, err)
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			return fmt.Errorf("%s holds a %s, not a CustomResourceDefinition", f, obj.GetKind())
		}
		// The version installed, as Helm's charts label what they install:
		// where the agent-sandbox target reads it for the pins.
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["app.kubernetes.io/version"] = AgentSandboxVersion
		obj.SetLabels(labels)
		if _, err := crds.Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	if err := c.waitFor(ctx, "kube-apiserver (agent-sandbox's CRDs established)", 60*time.Second, func() error {
		for _, n := range names {
			crd, err := crds.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			if !slices.ContainsFunc(conds, func(v any) bool {
				m, _ := v.(map[string]any)
				return m["type"] == "Established" && m["status"] == "True"
			}) {
				return fmt.Errorf("the CRD %s is not established", n)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return c.startEnv(AgentSandboxController, append(os.Environ(), "KUBECONFIG="+c.Kubeconfig), c.tools.AgentSandbox,
		"--extensions", "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
}

// AgentSandboxController is the name of agent-sandbox's controller among
// the cluster's processes (its log is logs/agent-sandbox-controller.log).
const AgentSandboxController = "agent-sandbox-controller"
