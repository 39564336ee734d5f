package provision

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/sealbench/sealbench/manifests"
)

// A Backend knows the resources of a target that lives behind its own
// command-line tool (limactl, Apple's container, msb): the VMs, and the
// images and volumes that tool holds outside any Engine. Its package
// registers it (RegisterBackend) from init, so teardown, the audit and
// --fix reach it wherever the package is linked in.
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

var (
	backendsMu sync.Mutex
	backends   = map[string]Backend{}
)

// RegisterBackend makes b the backend of target. It panics when target
// has one already: two packages claiming a target is a bug.
func RegisterBackend(target string, b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[target]; dup {
		panic(fmt.Sprintf("provision: backend for %q registered twice", target))
	}
	backends[target] = b
}

func backendOf(target string) Backend {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	return backends[target]
}

// backendTargets lists the targets with a backend, sorted.
func backendTargets() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	var ts []string
	for t := range backends {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}
