// Package agenttools is the agent-tools suite: the operations of an
// agent's tool loop that the second seed report times (traverse 2,048
// files in 32 directories, read and SHA-256 64 MiB, write 256 files of 64
// KiB, git status, rg, cargo build of 64 modules, npm install of 32
// packages, and all seven in one window, also timed from the Sandbox's
// launch to its exit), as cells beside the twelve. Its cargo and npm come
// from the Sandbox image's tools variant (vmimages.VariantTools). The
// suite is data:
// suite.json and the scripts beside it, embedded here and sealed into the
// bundle at suites/agent-tools/, in the format a user's own suite has
// (docs/suites.md uses this one as its example). Registering it is this
// package's init; package runner/suites links it.
package agenttools

import (
	"embed"

	"github.com/sealbench/sealbench/runner/cells"
)

//go:embed suite.json *.sh
var files embed.FS

// Suite is the agent-tools suite.
var Suite = func() *cells.Suite {
	s, err := cells.LoadSuite(files)
	if err != nil {
		panic("agenttools: " + err.Error()) // the package's test loads it too
	}
	return s
}()

func init() { cells.Register(Suite) }
