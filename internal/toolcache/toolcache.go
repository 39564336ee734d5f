// Package toolcache says where sealbench keeps what it builds or fetches
// once per machine, outside any source tree: $XDG_CACHE_HOME/sealbench, or
// ~/.cache/sealbench. Verified packages, VM images and fresh locks live
// there (see vmimages), and so do the tools the Makefile builds from the Go
// module proxy (cosign, limactl), each under its name and version, so that
// a fresh clone (CI's, every run) finds them instead of rebuilding them.
package toolcache

import (
	"os"
	"path/filepath"
)

// The versions of the tools the Makefile builds; a test holds them equal
// to the Makefile's.
const (
	CosignVersion = "v2.5.0"
	LimaVersion   = "v1.2.1"
	KubeVersion   = "v1.34.12"
	RunscVersion  = "v0.0.0-20260905035102-160fafc42237"
	// AgentSandboxVersion is sigs.k8s.io/agent-sandbox's, whose controller
	// and CRDs the Kubernetes test cluster runs.
	AgentSandboxVersion = "v1.0.1"
)

// Dir is the cache directory.
func Dir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sealbench")
	}
	return filepath.Join(os.TempDir(), "sealbench-cache")
}

// Tool is where `make` installs version of the tool name, joined with
// rel: Dir()/tools/NAME-VERSION/REL..., e.g. Tool("lima", LimaVersion,
// "bin", "limactl").
func Tool(name, version string, rel ...string) string {
	return filepath.Join(append([]string{Dir(), "tools", name + "-" + version}, rel...)...)
}

// Cosign is the cosign `make tools` builds.
func Cosign() string { return Tool("cosign", CosignVersion, "bin", "cosign") }

// Limactl is the limactl `make lima-tools` builds, beside its guest agent
// in Lima's own install layout.
func Limactl() string { return Tool("lima", LimaVersion, "bin", "limactl") }

// Kube is the Kubernetes binary name (kube-apiserver, kubelet) that `make
// kube-tools` builds, for internal/kubetest's cluster.
func Kube(name string) string { return Tool("kube", KubeVersion, "bin", name) }

// Runsc is the gVisor binary name (runsc, and containerd's shim
// containerd-shim-runsc-v1) that `make gvisor-tools` and `make
// kube-tools` build, side by side.
func Runsc(name string) string { return Tool("runsc", RunscVersion, "bin", name) }

// AgentSandbox is the file of agent-sandbox that `make kube-tools` puts
// in the tools cache: bin/agent-sandbox-controller, crds/.
func AgentSandbox(rel ...string) string { return Tool("agent-sandbox", AgentSandboxVersion, rel...) }
