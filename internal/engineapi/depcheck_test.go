package engineapi_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestEngineAPIIsTheStandardLibrary holds what lets the stand-in, a
// binary of the bundle, and the kube-engine share the router: it links
// nothing outside the standard library.
func TestEngineAPIIsTheStandardLibrary(t *testing.T) {
	testenv.OnlyDeps(t, "./internal/engineapi", "github.com/sealbench/sealbench/internal/engineapi")
}
