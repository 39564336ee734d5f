package cells_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestCellsNeedOnlyTheStandardLibrary holds the registry's role: data and
// a shell, which the report and the sampling runner link, so it links
// nothing but the standard library and manifests (itself standard library
// only).
func TestCellsNeedOnlyTheStandardLibrary(t *testing.T) {
	testenv.OnlyDeps(t, "./runner/cells",
		"github.com/sealbench/sealbench/runner/cells",
		"github.com/sealbench/sealbench/manifests")
}
