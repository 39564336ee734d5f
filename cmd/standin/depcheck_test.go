//go:build linux

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// forbidden are import prefixes the stand-in must never link: it ships in
// the bundle, which carries no signing or VM code, and it serves the Engine
// API with the API's types only, not the client and its telemetry.
var forbidden = []string{
	"github.com/sigstore/",
	"github.com/secure-systems-lab/",
	"github.com/lima-vm/",
	"golang.org/x/crypto/nacl/",
	"golang.org/x/crypto/scrypt",
	"github.com/sealbench/sealbench/bundle/sign",
	"github.com/sealbench/sealbench/provision/lima",
	"github.com/sealbench/sealbench/provision/qemu",
	"github.com/sealbench/sealbench/vmimages",
	"github.com/docker/docker/client",
	"go.opentelemetry.io/",
	"k8s.io/", // the kubernetes target's client-go, and internal/kubetest
}

// TestStandinLinksNoSigningOrVMCode holds the import graph, built as it
// ships: CGO_ENABLED=0, for both bundle platforms.
func TestStandinLinksNoSigningOrVMCode(t *testing.T) {
	goCmd := testenv.NeedCommand(t, "go")
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command(goCmd, "list", "-deps", "-tags", "sealbench_bundle", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps (%s): %v", arch, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 3 {
			t.Fatalf("go list -deps (%s) listed %v: the check is not looking at the right thing", arch, deps)
		}
		for _, d := range deps {
			for _, f := range forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("standin (linux/%s) links %s", arch, d)
				}
			}
		}
	}
}
