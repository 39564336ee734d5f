package kparam_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestKparamDeps: runs (linked by sealbench) and testenv (by every test)
// both import kparam, so it links nothing of ours but atomicfile (and
// manifests, under it), and nothing outside the standard library.
func TestKparamDeps(t *testing.T) {
	testenv.OnlyDeps(t, "./internal/kparam", "github.com/sealbench/sealbench/internal/kparam",
		"github.com/sealbench/sealbench/internal/atomicfile", "github.com/sealbench/sealbench/manifests")
}
