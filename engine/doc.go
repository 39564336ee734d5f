// Package engine is sealbench's Engine API client: how the host and the
// runner talk to an Engine (dockerd, or the stand-in) through the official
// Go client, so that both are driven by the same code.
//
// It connects (NewClient), asks an Engine once what it is and what it runs
// on (Identify: the Identity a run pins about a target), makes Sandboxes
// the one way every Sandbox is made (SandboxConfig, with the seccomp profile
// that refuses namespaces on dockerd; CreateSandbox), loads the Sandbox
// image (LoadImage), and runs the runner's execs (Execer: the three exec
// calls on plain HTTP over the official client's dialer, without the
// tracing transport the official client puts on every request). Whatever it
// creates it first records through a Recorder, the one method of a run's
// ledger it needs, so it links no provisioning: the host side and the
// sampling runner both import it, and it imports neither.
package engine
