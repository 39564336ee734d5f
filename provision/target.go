// Package provision brings up the targets sealbench measures, behind one
// small interface (Target), with what the commands need to know of each:
// its Registration (name, constructor, its own flags and hidden commands,
// the doctor's checks, its teardown and audit Backend, help and examples).
//
// A target is one package that registers itself from init (Register);
// provision/targets links them all, and nothing else names one: the
// commands build their flags, help and hidden commands from the registry
// (Flags, Subcommands), and the orchestration library reaches targets
// only through Target and the optional interfaces beside it (LeftUp).
// docs/targets.md says how to add one; provision/provisiontest/testtarget is one that
// only a test links.
//
// What a run made, and taking it down again, is package runs'; every
// resource is recorded in the run's ledger (package ledger) before it is
// created. provisiontest is the conformance suite every Target passes.
package provision

import (
	"context"
	"errors"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/runs"
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
	Inventory(ctx context.Context) ([]runs.Resource, error)
}

// ErrNotYet is what the provisioners of targets that are not written yet
// answer.
var ErrNotYet = errors.New("this target is not provisioned yet")
