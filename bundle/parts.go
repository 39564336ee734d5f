package bundle

// Part is one binary every bundle ships, built for every Platform it
// runs on.
type Part struct {
	Name    string // the file name under bin/<os>-<arch>/
	Package string // the main package, relative to the module root
	// LinuxOnly parts run inside Linux Sandboxes and VMs only; the others
	// (the runner) also run on a host of another OS that drives VMs.
	LinuxOnly bool
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
		// The runner is the sealbench binary itself: the host starts the
		// bundle's copy for its own OS and architecture to take the samples.
		{Name: "sealbench", Package: "./cmd/sealbench"},
		// The Engine API stand-in: Sandboxes as namespaces, no Docker.
		{Name: "standin", Package: "./cmd/standin", LinuxOnly: true},
		// The LayerFS daemon: Stores, Layers and FUSE Workspaces.
		{Name: "layerfsd", Package: "./cmd/layerfsd", LinuxOnly: true},
	}
	// Platforms: Linux hosts and Sandboxes on amd64 and arm64, and macOS
	// on Apple silicon, whose host drives the apple and microsandbox VMs
	// (only the runner is built for it).
	Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}}
)

// PartsFor returns the parts built for platform p.
func PartsFor(p Platform) []Part {
	var out []Part
	for _, part := range Parts {
		if p.OS == "linux" || !part.LinuxOnly {
			out = append(out, part)
		}
	}
	return out
}

// RunnerPath is where the runner for goos/goarch sits in a bundle.
func RunnerPath(goos, goarch string) string {
	return "bin/" + Platform{goos, goarch}.Dir() + "/sealbench"
}

// ShippedBuildTags is the build tag set for the binaries in a bundle.
const ShippedBuildTags = "sealbench_bundle"

// CellsSourceDir is where the cell bodies live in the source tree, and
// CellsDir where they go in the bundle.
const (
	CellsSourceDir = "runner/cells"
	CellsDir       = "cells"
	// SuitesSourceDir holds the other built-in suites, one directory
	// each; they go to the bundle's suites/NAME/ (manifests.SuitesDir).
	SuitesSourceDir = "runner/suites"
)
