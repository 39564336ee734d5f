// Package orchestrate does sealbench's jobs, each in one call, so that a
// command parses its flags and makes one call here:
//
//   - OpenBundle: check the bundle arguments, seal a throw-away bundle when
//     none is given, verify the bundle once (signature, then every file),
//     and find its Sandbox image beside it or build it from the verified
//     manifest;
//   - Provision: bring one target up from an open bundle, rolling back what
//     it made on failure;
//   - Run: bring targets up (or load the image into an Engine that is up),
//     run the cells on them, write the report, then tear down and audit,
//     on success, on failure and on Ctrl-C alike; each machine's targets
//     sampled by a runner of its own (this one's here, a remote host's
//     there, over SSH);
//   - Teardown, Audit, Doctor: the commands' views of package runs and
//     provision, over every run and remote host.
//
// It names no target: targets come from provision's registry, and their
// own options reach them unread (provision.OptionSet).
//
// Errors meant for the user carry their exit code (cliutil.UserError, with
// ExitMismatch, ExitSignature and cliutil's codes): the exit classification
// lives here, not in the commands.
//
// Values flow down: the bundle directory, the run id and the Engine
// endpoints go from here to provision's targets and to the runner, and
// nothing below calls back up.
package orchestrate
