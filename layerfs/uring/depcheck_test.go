package uring_test

import (
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestTransportLinksOnlyFUSEAndSyscalls holds the package's role: a
// transport under LayerFS's Workspace (which will import it), so it links
// go-fuse and golang.org/x/sys and nothing of LayerFS or sealbench.
func TestTransportLinksOnlyFUSEAndSyscalls(t *testing.T) {
	testenv.OnlyDeps(t, "./layerfs/uring",
		"github.com/sealbench/sealbench/layerfs/uring",
		"github.com/hanwen/go-fuse/v2/fuse",
		"github.com/hanwen/go-fuse/v2/splice",
		"golang.org/x/sys/unix")
}
