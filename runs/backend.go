package runs

import (
	"context"
	"errors"

	"github.com/sealbench/sealbench/manifests"
)

// A Backend knows the resources of a target that lives behind its own
// command-line tool (limactl, Apple's container, msb): the VMs, and the
// images and volumes that tool holds outside any Engine, or the containers
// a dockerd holds. Its package registers it (Registration.Backend) from
// init, so teardown, the audit and --fix reach it wherever the package is
// linked in.
type Backend interface {
	// Remove removes what e names and returns nil when it is absent. It
	// returns ErrGeneric for an entry the generic code handles (a
	// directory, a socket, a process, an Engine's container).
	Remove(ctx context.Context, runDir string, e manifests.LedgerEntry) error
	// Exists reports whether e's resource is still there, with a few
	// words about it; ErrGeneric as for Remove.
	Exists(ctx context.Context, runDir string, e manifests.LedgerEntry) (bool, string, error)
	// Audit lists what the backend holds that carries our label
	// (manifests.RunLabel), whichever run made it; run, when not empty,
	// limits it to that run. Notes say what could not be checked: a
	// missing tool, a service that is not running. An error means the
	// audit cannot prove anything for this target.
	Audit(ctx context.Context, run string) (found []Resource, notes []string, err error)
}

// ErrGeneric is what a Backend answers for an entry it leaves to the
// generic code.
var ErrGeneric = errors.New("not a backend resource")
