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
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("layerfsd depends on %s", dep)
			}
		}
	}
}
