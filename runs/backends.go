package runs

import (
	"sort"
	"sync"
)

// The Backends of the targets that have one, by kind: teardown, the audit
// and --fix ask them about what a target holds beyond the generic
// resources (provision.Register registers every registration's).
var (
	backendsMu sync.Mutex
	backends   = map[string]registeredBackend{}
)

type registeredBackend struct {
	b     Backend
	order int
}

// RegisterBackend makes b the Backend of target kind, listed at order
// among the others (the audit asks them in that order).
func RegisterBackend(kind string, order int, b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[kind] = registeredBackend{b: b, order: order}
}

// unregisterBackend removes kind's Backend: for tests.
func unregisterBackend(kind string) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	delete(backends, kind)
}

// backendOf is the Backend of the run's target (its kind's: TargetKind),
// or nil.
func backendOf(runDir, target string) Backend {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	return backends[TargetKind(runDir, target)].b
}

// backendTargets lists the kinds with a Backend, in order.
func backendTargets() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	ks := make([]string, 0, len(backends))
	for k := range backends {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if backends[ks[i]].order != backends[ks[j]].order {
			return backends[ks[i]].order < backends[ks[j]].order
		}
		return ks[i] < ks[j]
	})
	return ks
}
