// Package provision brings up the targets sealbench measures, behind one
// small interface (Target), and takes them down again: every resource a run
// creates is first recorded in the run's ledger (package ledger), teardown
// walks the ledger in reverse and keeps going past failures, and the audit
// proves nothing is left.
//
// # Runs
//
// A run is a directory under the state directory's runs/ (see
// DefaultStateDir), named by its run id, holding the ledger and everything
// of the run that lives in files: a stand-in's binary, socket and state,
// logs. A resource outside the run directory (a container, an image) is
// recorded in the ledger with its Engine endpoint and, where the backend
// has labels, carries sealbench.run=<run id>.
//
// # Targets
//
// One package per target, each registering itself (Register: its name,
// whether it needs root, its constructor, its teardown and audit Backend,
// the doctor's checks and install hints); provision/targets links them all:
//
//   - provision/local: the Engine API stand-in on this host, from the
//     bundle's own binary; needs root.
//   - provision/docker: the user's dockerd (DOCKER_HOST or the default
//     socket), Sandboxes as containers with no network.
//   - provision/lima: a Lima VM under QEMU with TCG, running the stand-in,
//     limactl as an unprivileged uid; needs root.
//   - provision/apple: one Apple container VM running the stand-in (macOS
//     on Apple silicon).
//   - provision/microsandbox: one msb microVM running the stand-in, its
//     Engine reached through msb exec.
//
// provisiontest is the conformance suite every Target passes.
package provision

import (
	"context"
	"errors"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
)

// Target is one backend to measure.
//
// Every method is safe to call in any order and more than once:
//   - Create MUST return nil when the target already exists, and change
//     nothing then. It records every resource in the run's ledger before
//     creating it.
//   - InstallImage MUST return nil when the image is already installed.
//   - Destroy MUST return nil when the target does not exist, or no longer
//     does; it removes everything of the run on this target and keeps going
//     past failures, returning them all.
//   - Endpoint and Identity are valid only after Create.
type Target interface {
	// Name is the target's name: local, docker, ...
	Name() string
	// Create brings the target up, and its Engine with it.
	Create(ctx context.Context) error
	// InstallImage loads the bundle's Sandbox image into the target's
	// Engine and checks that the Engine then has it under img.ID.
	InstallImage(ctx context.Context, img engine.Image) error
	// Endpoint is the Engine API endpoint: unix:///path or tcp://host:port.
	Endpoint() string
	// Identity describes the target as a sample pins it.
	Identity(ctx context.Context) (*engine.Identity, error)
	// Destroy takes the target down.
	Destroy(ctx context.Context) error
	// Inventory lists what of this run the target holds now.
	Inventory(ctx context.Context) ([]Resource, error)
}

// ErrNotYet is what the provisioners of targets that are not written yet
// answer.
var ErrNotYet = errors.New("this target is not provisioned yet")

// Resource is one thing a target holds, as Inventory and the audit list it.
type Resource struct {
	Target string                 `json:"target,omitempty"`
	Run    string                 `json:"run,omitempty"`
	Host   string                 `json:"host,omitempty"` // a remote host's, ssh://user@host:port
	Kind   manifests.ResourceKind `json:"kind"`
	Key    string                 `json:"key"`
	Detail string                 `json:"detail,omitempty"`
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
