package kubernetes_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sealbench/sealbench/provision/kubernetes"
	"github.com/sealbench/sealbench/runs"
)

// kubeconfig has two contexts on one cluster: bench, whose namespace is
// sealbench-ci (the current context), and plain, which sets none.
const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: not-a-secret
contexts:
- name: bench
  context: {cluster: c, user: u, namespace: sealbench-ci}
- name: plain
  context: {cluster: c, user: u}
current-context: bench
`

// TestNamespaceFromTheKubeconfigContext: without --namespace, the pods go
// in the namespace of the kubeconfig context (--kube-context's, or the
// current one), as kubectl's would; default when the context sets none;
// --namespace wins. Nothing reaches a cluster.
func TestNamespaceFromTheKubeconfigContext(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(cfg, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	run, err := runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	for _, tc := range []struct {
		what      string
		flags     kubernetes.Flags
		kubeEnv   string
		namespace string
	}{
		{"the current context's", kubernetes.Flags{Kubeconfig: cfg}, "", "sealbench-ci"},
		{"KUBECONFIG's current context's", kubernetes.Flags{}, cfg, "sealbench-ci"},
		{"--kube-context plain, which sets none", kubernetes.Flags{Kubeconfig: cfg, Context: "plain"}, "", kubernetes.DefaultNamespace},
		{"--namespace over the context's", kubernetes.Flags{Kubeconfig: cfg, Namespace: "mine"}, "", "mine"},
		{"no kubeconfig at all", kubernetes.Flags{}, filepath.Join(t.TempDir(), "absent"), kubernetes.DefaultNamespace},
	} {
		t.Setenv("KUBECONFIG", tc.kubeEnv)
		k, err := kubernetes.New(kubernetes.Options{Run: run, Kube: tc.flags, EngineCommand: []string{"/bin/true"}})
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got := k.Config().Namespace; got != tc.namespace {
			t.Errorf("%s: namespace %q; want %q", tc.what, got, tc.namespace)
		}
	}
}
