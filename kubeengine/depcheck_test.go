package kubeengine_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestKubeEngineIsAnEngine holds why the package stands beside standin/
// and not under the kubernetes target: it is an Engine (the Engine API in
// front of a cluster, as the stand-in is in front of namespaces), which
// the target starts and its teardown runs. It links no provisioning,
// bundle, signing or VM code, and not the stand-in.
func TestKubeEngineIsAnEngine(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		bad := testenv.Forbidden(testenv.Deps(t, goos, "./kubeengine"),
			"github.com/sealbench/sealbench/provision",
			"github.com/sealbench/sealbench/provision/",
			"github.com/sealbench/sealbench/bundle",
			"github.com/sealbench/sealbench/bundle/",
			"github.com/sealbench/sealbench/vmimages",
			"github.com/sealbench/sealbench/host",
			"github.com/sealbench/sealbench/standin",
			"github.com/sealbench/sealbench/standin/",
			"github.com/sigstore/",
			"github.com/lima-vm/",
		)
		if len(bad) > 0 {
			t.Errorf("kubeengine (%s) links %v", goos, bad)
		}
	}
}
