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
