package inventory_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestInventoryIsSmallAndPortable holds why the package exists: the
// host-side audit reads a stand-in's state directory on every host without
// linking the server, its Sandboxes or the Engine API types.
func TestInventoryIsSmallAndPortable(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		for _, pkg := range []string{"./standin/inventory", "./provision"} {
			deps := testenv.Deps(t, goos, pkg)
			if bad := testenv.Forbidden(deps,
				"github.com/sealbench/sealbench/standin",
				"github.com/sealbench/sealbench/standin/sandbox",
			); len(bad) > 0 {
				t.Errorf("%s (%s) links the stand-in's server: %v", pkg, goos, bad)
			}
		}
		deps := testenv.Deps(t, goos, "./standin/inventory")
		if bad := testenv.Forbidden(deps, "github.com/docker/", "github.com/moby/", "github.com/spf13/"); len(bad) > 0 {
			t.Errorf("standin/inventory (%s) links %v", goos, bad)
		}
	}
}
