package runs

import (
	"github.com/sealbench/sealbench/manifests"
)

// Resource is one thing a target holds, as Inventory and the audit list it.
type Resource struct {
	Target string                 `json:"target,omitempty"`
	Run    string                 `json:"run,omitempty"`
	Host   string                 `json:"host,omitempty"` // a remote host's, ssh://user@host:port
	Kind   manifests.ResourceKind `json:"kind"`
	Key    string                 `json:"key"`
	Detail string                 `json:"detail,omitempty"`
	// Foreign says the audit found it by the sealbench.run label only, for
	// a run this state directory never made (runs.history does not name
	// it): another state directory's, perhaps in progress there.
	Foreign bool `json:"foreign,omitempty"`

	// running is set for a container that is running: a foreign one is
	// then left by Fix unless forced.
	running bool
}

func (r Resource) String() string {
	s := string(r.Kind) + " " + r.Key
	if r.Target != "" {
		s = r.Target + ": " + s
	}
	if r.Host != "" {
		s += " on " + r.Host
	}
	if r.Run != "" {
		s += " (run " + r.Run + ")"
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}
