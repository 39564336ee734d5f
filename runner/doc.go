// Package runner holds what the runner needs to know about the twelve
// cells, independent of any target: the registry (each cell's body file,
// its base and its verifier, all as data), the deterministic base file, and
// a Shell to run bodies and verifiers in a workspace.
//
// # Cells as a conformance suite
//
// Cells is one map by name, C01..C12, like a conformance suite's map of
// named tests: the runner drives every target through the same map, and the
// registry test runs every body with /bin/sh in a plain directory and
// requires its verifier to pass there, and to fail once the result is
// tampered with.
//
// # Verifiers as data
//
// A verifier is a list of shell checks, each a short POSIX sh script and the
// exact output it must print. They run in the workspace after the timed run,
// untimed, with the body's standard output on their standard input, using
// only what the Sandbox image has (dash, coreutils, findutils, git). The
// expected outputs that are digests are computed here in Go.
package runner
