package kparam_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestKparamIsTheStandardLibrary: runs (linked by sealbench) and testenv
// (imported by the tests of manifests, which everything imports) both
// import kparam, so it links nothing of ours, or there is an import cycle,
// and nothing outside the standard library.
func TestKparamIsTheStandardLibrary(t *testing.T) {
	testenv.OnlyDeps(t, "./internal/kparam", "github.com/sealbench/sealbench/internal/kparam")
}
