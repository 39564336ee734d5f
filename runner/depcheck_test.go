package runner_test

import (
	"slices"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestRunnerLinksNoProvisioning holds the line between the sides: the
// runner samples (Sandboxes, execs, timing, telemetry, verifiers) as the
// bundle's own runner, so it reaches Engines only through package engine
// and links no provisioning, keys, signing, SSH or VM code; and package
// engine, which the host imports too, links none of them either. The one
// piece of provision it links is the ledger writer, a leaf over
// manifests, to record each Sandbox before creating it.
func TestRunnerLinksNoProvisioning(t *testing.T) {
	forbidden := []string{
		"github.com/sealbench/sealbench/provision",
		"github.com/sealbench/sealbench/provision/",
		"github.com/sealbench/sealbench/bundle",
		"github.com/sealbench/sealbench/bundle/",
		"github.com/sealbench/sealbench/vmimages",
		"github.com/sealbench/sealbench/standin",
		"github.com/sealbench/sealbench/standin/",
		"github.com/sigstore/",
		"github.com/lima-vm/",
		"github.com/google/go-containerregistry/",
		"github.com/hashicorp/go-multierror",
		"github.com/spf13/",
		"golang.org/x/crypto/ssh",
		"golang.org/x/crypto/ssh/",
		"k8s.io/",
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, pkg := range []string{"./runner", "./engine"} {
			bad := testenv.Forbidden(testenv.Deps(t, goos, pkg), forbidden...)
			bad = slices.DeleteFunc(bad, func(d string) bool { return d == "github.com/sealbench/sealbench/ledger" })
			if len(bad) > 0 {
				t.Errorf("%s (%s) links %v", pkg, goos, bad)
			}
		}
	}
}
