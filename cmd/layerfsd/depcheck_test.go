//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps holds the import graph: layerfsd goes into the bundle and must
// stay a static, pure-Go binary that links no signing, VM or container code.
func TestDeps(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/sigstore/",
		"github.com/lima-vm/",
		"github.com/google/go-containerregistry/",
		"github.com/docker/",
		"runtime/cgo",
		"k8s.io/",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("layerfsd depends on %s", dep)
			}
		}
	}
}

// TestDaemonAPIDeps: daemonapi is the contract the runner and the host side
// link too, so it stays the standard library (plus manifests' formats), on
// every platform the host side builds for.
func TestDaemonAPIDeps(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/sealbench/sealbench/layerfs/daemonapi")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps (%s): %v", goos, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps (%s) listed nothing: the check is not looking at the right thing", goos)
		}
		for _, dep := range deps {
			switch dep {
			case "github.com/sealbench/sealbench/layerfs/daemonapi", "github.com/sealbench/sealbench/manifests":
			default:
				t.Errorf("daemonapi (%s) links %s", goos, dep)
			}
		}
	}
}
