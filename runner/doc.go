// Package runner samples: it runs the twelve cells (package cells) on one
// or more Engines under the cache protocol, in a seeded random interleaving,
// and writes every sample as it completes (samples.jsonl, pins.json).
//
// It knows a target only as the Identity its Engine gave (package engine:
// endpoint, kind, machine; the pins come from it), records each Sandbox in
// the run's ledger through engine.Recorder before creating it, and drives
// layerfsd inside the Sandbox with layerfs/daemonapi's typed command lines
// and strict decoders. A sample is a sequence of phase methods (bundle
// check, setup, warm-up, timed run, telemetry, verifier, Commit and
// unmount, the base Layer check, the native reference under the same
// protocol). It links no provisioning, keys, signing or VM code (a test
// holds that): it runs as the bundle's own runner, RunPlan being its
// entry (`sealbench sample --plan`, started by the host's `run` from a
// hash-checked copy; manifests.RunPlan is the contract).
//
// stats holds the statistics and the interleaving; report renders results.
package runner
