// Package cells is the twelve cells as data: the registry (each cell's
// body, its base and its verifier), the bodies themselves (C01.sh..C12.sh,
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
// # Verifiers as data
//
// A verifier is a list of shell checks, each a short POSIX sh script and the
// exact output it must print. They run in the workspace after the timed run,
// untimed, with the body's standard output on their standard input, using
// only what the Sandbox image has (dash, coreutils, findutils, git). The
// expected outputs that are digests are computed here in Go.
package cells
