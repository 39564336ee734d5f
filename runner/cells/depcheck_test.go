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
	allowed := map[string]bool{
		"github.com/sealbench/sealbench/runner/cells": true,
		"github.com/sealbench/sealbench/manifests":    true,
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, d := range testenv.Deps(t, goos, "./runner/cells") {
			if !allowed[d] {
				t.Errorf("runner/cells (%s) links %s", goos, d)
			}
		}
	}
}
