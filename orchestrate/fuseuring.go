package orchestrate

import (
	"fmt"
	"os"
	"strings"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// fuseURingHint is what a refused --fuse-uring says to do.
const fuseURingHint = "FUSE over io_uring needs Linux 6.14 or newer built with CONFIG_FUSE_IO_URING=y; " +
	"`sealbench doctor` says what this host has; without --fuse-uring LayerFS is served over /dev/fuse"

// onHostKernel reports whether target name's Sandboxes run on this host's
// kernel, by its registration (local, docker); with --engine (no
// registration), an Engine on a unix socket is taken to be this host's,
// and its kernel decides (pinFUSEURing).
func onHostKernel(name, endpoint string) bool {
	if reg, ok := provision.Lookup(name); ok {
		return reg.HostKernel
	}
	return strings.HasPrefix(endpoint, "unix://")
}

// CheckFUSEURing checks, before a bundle is opened or a run is started,
// that --fuse-uring can be honoured for targets (or for the Engine at
// endpoint, with --engine): where one of them runs on this host's kernel,
// the kernel must have FUSE over io_uring (the fuse module's enable_uring
// exists) and we must be root (it is written through sysfs). Targets on a
// kernel of their own (a VM's guest) are not refused: the run pins
// "n/a" for them and says so.
func CheckFUSEURing(targets []string, endpoint string) error {
	here := endpoint != "" && onHostKernel("", endpoint)
	for _, n := range targets {
		here = here || onHostKernel(n, "")
	}
	if !here {
		return nil
	}
	if _, err := runs.ReadKernelParam(runs.FUSEURingParam); err != nil {
		return usagef(fuseURingHint, "--fuse-uring: kernel %s has no FUSE over io_uring: %v", runs.HostKernel(), err)
	}
	if os.Geteuid() != 0 {
		return usagef("run it as root (sudo), or drop --fuse-uring",
			"--fuse-uring writes the kernel parameter %s, which needs root (running as uid %d)", runs.FUSEURingParam, os.Geteuid())
	}
	return nil
}

// setupFUSEURing runs before any target of run comes up. With on
// (--fuse-uring) and a target on this host's kernel, it records
// enable_uring in the run's ledger and then turns it on (teardown puts it
// back as it was; it is kernel-wide, so the docker target's Sandboxes on
// this host get it too). It says which targets it does not reach, and
// returns what to pin for the targets on this host's kernel: on or off,
// as enable_uring now reads.
func setupFUSEURing(run *runs.Run, on bool, targets []string, endpoint string, logf func(string, ...any)) (string, error) {
	var here, others []string
	if endpoint != "" && onHostKernel("", endpoint) {
		here = append(here, endpoint)
	}
	for _, n := range targets {
		if onHostKernel(n, "") {
			here = append(here, n)
		} else {
			others = append(others, n)
		}
	}
	if on && len(others) > 0 {
		logf("--fuse-uring: %s run on a kernel of their own, which this host's enable_uring does not reach: pinned %q",
			strings.Join(others, ", "), manifests.FUSEURingNA)
	}
	switch {
	case on && len(here) > 0:
		if err := CheckFUSEURing(targets, endpoint); err != nil {
			return "", err
		}
		was, err := run.SetKernelParam(runs.FUSEURingParam, "Y", "--fuse-uring: FUSE over io_uring for LayerFS (kernel-wide)")
		if err != nil {
			return "", fmt.Errorf("--fuse-uring: %w", err)
		}
		if was == "Y" {
			logf("--fuse-uring: %s was on already (recorded; teardown leaves it on)", runs.FUSEURingParam)
		} else {
			logf("--fuse-uring: %s turned on for %s (was %s; recorded in the ledger, teardown puts it back)",
				runs.FUSEURingParam, strings.Join(here, ", "), was)
		}
	case on:
		logf("--fuse-uring: no target of this run runs on this host's kernel: %s left as it is", runs.FUSEURingParam)
	}
	if v, err := runs.ReadKernelParam(runs.FUSEURingParam); err == nil && (v == "Y" || v == "1") {
		return manifests.FUSEURingOn, nil
	}
	return manifests.FUSEURingOff, nil
}

// pinFUSEURing fills in id.FUSEURing: hostState for a target on this
// host's kernel (hostKernel, and the kernel its Engine reports is this
// host's), manifests.FUSEURingNA for one on another (a VM's guest, a
// dockerd on another machine).
func pinFUSEURing(id *engine.Identity, hostKernel bool, hostState string) {
	if hostKernel && id.Kernel == runs.HostKernel() {
		id.FUSEURing = hostState
	} else {
		id.FUSEURing = manifests.FUSEURingNA
	}
}
