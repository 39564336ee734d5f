// Package cells is the cells as data, the twelve and every suite's: the
// registry (each cell's body, its base and its verifier), the bodies themselves (C01.sh..C12.sh,
// beside this file, embedded and sealed into the bundle's cells/), the
// deterministic base file, and a Shell to run bodies and verifiers in a
// workspace. It needs only the standard library (and manifests' Digest), so
// the report and the sampling runner link it without anything else; a test
// holds that.
//
// # Cells as a conformance suite
//
// All is one map by name, C01..C12, like a conformance suite's map of
// named tests: the runner drives every target through the same map, and the
// registry test runs every body with /bin/sh in a plain directory and
// requires its verifier to pass there, and to fail once the result is
// tampered with.
//
// # Suites
//
// The twelve are one suite, the default (manifests.DefaultSuite), which
// this package registers itself. Every other suite is data, a suite.json
// and its scripts (manifests.Suite, docs/suites.md): a built-in one's
// package embeds and registers it (Register; runner/suites links them
// all), a user's comes from a directory (LoadSuite). Select resolves a
// run's --suite and --cells into a Selection: its suites, its cells (ids
// unique across them), and the tools its suites need, checked against the
// Sandbox image's package lock.
//
// # Verifiers as data
//
// A verifier is a list of shell checks, each a short POSIX sh script and the
// exact output it must print. They run in the workspace after the timed run,
// untimed, with the body's standard output on their standard input, using
// only what the Sandbox image has (dash, coreutils, findutils, git;
// ripgrep too, for the agent-tools suite). The
// expected outputs that are digests are computed here in Go.
package cells
