package bundle

// Part is one binary every bundle ships, built for every Platform.
type Part struct {
	Name    string // the file name under bin/<os>-<arch>/
	Package string // the main package, relative to the module root
}

// Platform is an os/arch pair a bundle ships binaries for.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Dir is the platform's directory under bin/.
func (p Platform) Dir() string { return p.OS + "-" + p.Arch }

// The one list of what a bundle ships. Everything here is built with
// ShippedBuildTags, which leaves out signing and VM code: the depcheck test
// holds every part to that.
var (
	Parts = []Part{
		// The runner is the sealbench binary itself.
		{Name: "sealbench", Package: "./cmd/sealbench"},
		// The Engine API stand-in: Sandboxes as namespaces, no Docker.
		{Name: "standin", Package: "./cmd/standin"},
		// The LayerFS daemon: Stores, Layers and FUSE Workspaces.
		{Name: "layerfsd", Package: "./cmd/layerfsd"},
	}
	Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}
)

// ShippedBuildTags is the build tag set for the binaries in a bundle.
const ShippedBuildTags = "sealbench_bundle"

// CellsSourceDir is where the cell bodies live in the source tree, and
// CellsDir where they go in the bundle.
const (
	CellsSourceDir = "runner/cells"
	CellsDir       = "cells"
)
