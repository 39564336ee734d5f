// Package version holds the version string stamped into every sealbench
// binary. Sealing sets it with -ldflags -X so that a binary can say which
// source it came from; a plain `go build` says "devel".
package version

// Version is set at link time: -X github.com/sealbench/sealbench/internal/version.Version=...
var Version = "devel"

// Base is the release this source tree is on the way to. A sealed binary's
// Version is Base plus the commit it was sealed from, e.g.
// "0.1.0+g1a2b3c4d5e6f" or, from a dirty tree, "0.1.0+g1a2b3c4d5e6f.dirty".
const Base = "0.1.0"
