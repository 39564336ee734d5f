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

// FUSEURing is what a run does with this host's enable_uring, the fuse
// module's switch for FUSE over io_uring (kernel-wide, off by default),
// for its targets on this host's kernel (local; docker on this host).
// Targets on a kernel of their own (a VM's guest) are not reached either
// way: they pin manifests.FUSEURingNA.
type FUSEURing int

const (
	// FUSEURingOff leaves enable_uring as it is, and has LayerFS served
	// over /dev/fuse on this host's kernel whatever it reads (the pins
	// say off, and the runner mounts with --fuse-transport dev).
	FUSEURingOff FUSEURing = iota
	// FUSEURingAuto turns enable_uring on for the run where the kernel
	// has it and we are root (recorded in the ledger first; the last run
	// on this machine relying on it puts it back), and otherwise goes on
	// as it is, saying why. The CLI's default.
	FUSEURingAuto
	// FUSEURingOn is FUSEURingAuto that refuses to run where it cannot.
	FUSEURingOn
)

// FUSEURingValues are the values ParseFUSEURing takes, in order.
var FUSEURingValues = []string{"auto", "on", "off"}

func (m FUSEURing) String() string {
	switch m {
	case FUSEURingAuto:
		return "auto"
	case FUSEURingOn:
		return "on"
	}
	return "off"
}

// ParseFUSEURing parses --fuse-uring's value.
func ParseFUSEURing(s string) (FUSEURing, error) {
	switch strings.ToLower(s) {
	case "auto":
		return FUSEURingAuto, nil
	case "on", "true", "yes":
		return FUSEURingOn, nil
	case "off", "false", "no":
		return FUSEURingOff, nil
	}
	return 0, fmt.Errorf("%q is not one of auto, on, off", s)
}

// fuseURingHint is what a refused --fuse-uring=on says to do.
const fuseURingHint = "FUSE over io_uring needs Linux 6.14 or newer built with CONFIG_FUSE_IO_URING=y; " +
	"`sealbench doctor` says what this host has; with --fuse-uring=auto (the default) LayerFS is served over /dev/fuse where it cannot be"

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
// that --fuse-uring=on can be honoured for targets (or for the Engine at
// endpoint, with --engine): where one of them runs on this host's kernel,
// the kernel must have FUSE over io_uring (the fuse module's enable_uring
// exists) and we must be root (it is written through sysfs). Targets on a
// kernel of their own (a VM's guest) are not refused: the run pins
// "n/a" for them and says so.
func CheckFUSEURing(targets []string, endpoint string) error {
	here, _ := splitByKernel(targets, endpoint)
	if len(here) == 0 {
		return nil
	}
	if _, err := runs.ReadKernelParam(runs.FUSEURingParam); err != nil {
		return usagef(fuseURingHint, "--fuse-uring: kernel %s has no FUSE over io_uring: %v", runs.HostKernel(), err)
	}
	if os.Geteuid() != 0 {
		return usagef("run it as root (sudo), or leave --fuse-uring at auto, which goes on over /dev/fuse",
			"--fuse-uring writes the kernel parameter %s, which needs root (running as uid %d)", runs.FUSEURingParam, os.Geteuid())
	}
	return nil
}

// splitByKernel splits targets (and the Engine at endpoint, with
// --engine) into those on this host's kernel and the others.
func splitByKernel(targets []string, endpoint string) (here, others []string) {
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
	return here, others
}

// setupFUSEURing runs before any target of run comes up, and returns
// what to pin for the targets on this host's kernel. With mode auto or
// on and such a target, it holds enable_uring on for the run (recorded
// in the ledger first; the last run relying on it puts it back at its
// teardown; it is kernel-wide, so the docker target's Sandboxes on this
// host get it too) and pins on or off as it then reads. Auto that cannot
// (no such parameter, not root, sysfs refusing the write) says why and
// goes on as it is. Off changes nothing and pins off, so that the runner
// serves LayerFS over /dev/fuse.
func setupFUSEURing(run *runs.Run, mode FUSEURing, targets []string, endpoint string, logf func(string, ...any)) (string, error) {
	if mode == FUSEURingOff {
		return manifests.FUSEURingOff, nil
	}
	here, others := splitByKernel(targets, endpoint)
	if len(others) > 0 && (mode == FUSEURingOn || len(here) > 0) {
		logf("FUSE over io_uring: %s run on a kernel of their own, which this host's enable_uring does not reach: pinned %q",
			strings.Join(others, ", "), manifests.FUSEURingNA)
	}
	if len(here) == 0 {
		if mode == FUSEURingOn {
			logf("--fuse-uring: no target of this run runs on this host's kernel: %s left as it is", runs.FUSEURingParam)
		}
		return hostFUSEURing(), nil
	}
	if mode == FUSEURingOn {
		if err := CheckFUSEURing(targets, endpoint); err != nil {
			return "", err
		}
	}
	if _, err := runs.ReadKernelParam(runs.FUSEURingParam); err != nil {
		logf("FUSE over io_uring: kernel %s has none (%v): LayerFS is served over /dev/fuse", runs.HostKernel(), err)
		return manifests.FUSEURingOff, nil
	}
	if os.Geteuid() != 0 {
		if pin := hostFUSEURing(); pin == manifests.FUSEURingOn {
			logf("FUSE over io_uring: %s reads on, and LayerFS uses it; not root, so nothing holds it on for the run", runs.FUSEURingParam)
			return pin, nil
		}
		logf("FUSE over io_uring: not used: turning %s on needs root; LayerFS is served over /dev/fuse", runs.FUSEURingParam)
		return manifests.FUSEURingOff, nil
	}
	was, err := run.SetKernelParam(runs.FUSEURingParam, "Y", "FUSE over io_uring for LayerFS (--fuse-uring="+mode.String()+"; kernel-wide)")
	switch {
	case err != nil && mode == FUSEURingOn:
		return "", fmt.Errorf("--fuse-uring: %w", err)
	case err != nil:
		pin, transport := hostFUSEURing(), "/dev/fuse"
		if pin == manifests.FUSEURingOn {
			transport = "io_uring"
		}
		logf("FUSE over io_uring: %s could not be held on for the run (%v); it reads %s, so LayerFS is served over %s",
			runs.FUSEURingParam, err, pin, transport)
		return pin, nil
	case was == "Y":
		logf("FUSE over io_uring: %s was on already (recorded; teardown leaves it on)", runs.FUSEURingParam)
	default:
		logf("FUSE over io_uring: %s on for %s (it was %s; recorded in the ledger, and put back once no run relies on it; --fuse-uring=off leaves it)",
			runs.FUSEURingParam, strings.Join(here, ", "), was)
	}
	return hostFUSEURing(), nil
}

// hostFUSEURing is what to pin for a target on this host's kernel as
// enable_uring reads now: on or off.
func hostFUSEURing() string {
	if v, err := runs.ReadKernelParam(runs.FUSEURingParam); err == nil && (v == "Y" || v == "1") {
		return manifests.FUSEURingOn
	}
	return manifests.FUSEURingOff
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
