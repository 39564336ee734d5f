package toolcache

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// TestVersionsMatchTheMakefile: the Go side looks for the tools where the
// Makefile puts them, so the two must name the same versions.
func TestVersionsMatchTheMakefile(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	for _, c := range []struct{ file, variable, want string }{
		{"Makefile", "COSIGN_VERSION", CosignVersion},
		{"mk/lima.mk", "LIMA_VERSION", LimaVersion},
		{"mk/kube.mk", "KUBE_VERSION", KubeVersion},
		{"mk/gvisor.mk", "RUNSC_VERSION", RunscVersion},
		{"mk/kube.mk", "AGENT_SANDBOX_VERSION", AgentSandboxVersion},
	} {
		b, err := os.ReadFile(filepath.Join(root, c.file))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^` + c.variable + ` := (\S+)$`).FindSubmatch(b)
		if m == nil || string(m[1]) != c.want {
			t.Errorf("%s sets %s to %q, toolcache says %q", c.file, c.variable, m, c.want)
		}
	}
}

func TestToolPaths(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/c")
	if got := Limactl(); got != "/c/sealbench/tools/lima-"+LimaVersion+"/bin/limactl" {
		t.Errorf("Limactl() = %s", got)
	}
	if got := Kube("kubelet"); got != "/c/sealbench/tools/kube-"+KubeVersion+"/bin/kubelet" {
		t.Errorf("Kube(kubelet) = %s", got)
	}
	if got := Runsc("containerd-shim-runsc-v1"); got != "/c/sealbench/tools/runsc-"+RunscVersion+"/bin/containerd-shim-runsc-v1" {
		t.Errorf("Runsc(containerd-shim-runsc-v1) = %s", got)
	}
	if got := AgentSandbox("crds"); got != "/c/sealbench/tools/agent-sandbox-"+AgentSandboxVersion+"/crds" {
		t.Errorf("AgentSandbox(crds) = %s", got)
	}
	if got := Cosign(); got != "/c/sealbench/tools/cosign-"+CosignVersion+"/bin/cosign" {
		t.Errorf("Cosign() = %s", got)
	}
}
