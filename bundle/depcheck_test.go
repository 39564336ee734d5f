package bundle

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// Signing and VM code: none of it may be linked into a binary that ships
// inside a bundle.
var forbiddenInBundle = []string{
	"github.com/sigstore/",
	"github.com/secure-systems-lab/",
	"github.com/in-toto/",
	"github.com/lima-vm/",
	"golang.org/x/crypto/nacl/",
	"golang.org/x/crypto/scrypt",
	Module + "/bundle/sign",
	Module + "/bundle/attest",
	Module + "/provision/lima",
	Module + "/vmimages",
	// Registries are the host's business: the runner never pulls.
	Module + "/ociartifact",
	"github.com/google/go-containerregistry/pkg/v1/remote",
}

func deps(t *testing.T, tags, pkg string) []string {
	t.Helper()
	return depsFor(t, "linux", tags, pkg)
}

func depsFor(t *testing.T, goos, tags, pkg string) []string {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = testenv.ModuleRoot(t)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func forbidden(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, f := range forbiddenInBundle {
			if strings.HasPrefix(d, f) {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

// TestShippedPartsLinkNoSigningOrVMCode holds the import direction: the
// binaries in a bundle, built as Seal builds them, link no signing or VM code.
func TestShippedPartsLinkNoSigningOrVMCode(t *testing.T) {
	for _, pl := range Platforms {
		for _, p := range PartsFor(pl) {
			if bad := forbidden(depsFor(t, pl.OS, ShippedBuildTags, p.Package)); len(bad) > 0 {
				t.Errorf("%s (shipped as %s for %s) links %v", p.Package, p.Name, pl, bad)
			}
		}
	}
	// The check can fail: the host build of sealbench does link signing.
	if bad := forbidden(deps(t, "", "./cmd/sealbench")); len(bad) == 0 {
		t.Error("the host sealbench links no signing code: the check above is not looking at the right thing")
	}
}

// TestManifestsImportsNothingOfOurs: manifests is imported by all and
// imports only the standard library.
func TestManifestsImportsNothingOfOurs(t *testing.T) {
	for _, d := range deps(t, "", "./manifests") {
		if d != Module+"/manifests" {
			t.Errorf("manifests imports %s", d)
		}
	}
}
