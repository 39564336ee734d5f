package docker

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
)

// The gvisor target is the docker target with its Sandboxes under gVisor:
// the same dockerd, image load, ledger, teardown and audit, and every
// Sandbox created with the runtime GVisorRuntime (its Identity's Runtime,
// which the plan gives the runner and the conformance suite reads),
// which dockerd must have (`scripts/dockerd start` adds the runsc `make
// gvisor-tools` builds). gVisor's Sentry serves the Sandbox's system
// calls, /dev/fuse included, with a FUSE of its own: the pins say so
// (FUSE: manifests.FUSEGVisor), with runsc's version and platform.
const (
	GVisorName    = "gvisor"
	GVisorRuntime = "runsc"
)

// gvisorFix is what the doctor and Create say to do when dockerd has no runsc.
const gvisorFix = "`make gvisor-tools` builds runsc into ~/.cache/sealbench/tools; `scripts/dockerd stop; scripts/dockerd start` then runs a private dockerd with it as the runtime runsc (or add runsc to your dockerd's daemon.json runtimes, with runtimeArgs [\"--platform=systrap\", \"--oci-seccomp\"])"

func init() {
	provision.Register(provision.Registration{
		Name: GVisorName, What: "the dockerd you have, its Sandboxes under gVisor (the runsc runtime, systrap platform)", Order: 25,
		New: func(o provision.NewOptions) (provision.Target, error) {
			return New(Options{Run: o.Run, Log: o.Log, Target: GVisorName})
		},
		Backend: backend{name: GVisorName},
		Needs:   []string{"dockerd", "runsc"},
		Note:    "gVisor's own FUSE serves LayerFS: no passthrough, no io_uring, no mmap(2) of a file (C12, git, is not supported there)",
		Checks: func(ctx context.Context) []provision.Check {
			ep, err := ResolveEndpoint("")
			if err != nil {
				return []provision.Check{{Name: "runsc", Detail: err.Error(), Fix: gvisorFix}}
			}
			return []provision.Check{RunscCheck(ctx, ep.Host)}
		},
		Help: `The dockerd must know runsc as its runtime "runsc" (make gvisor-tools
builds one; scripts/dockerd gives its private dockerd the newest built).`,
		Examples: []string{
			"  # gVisor beside the stand-in (C12 is not supported there: gVisor's FUSE cannot mmap a file):\n  sudo sealbench run --target local,gvisor --cells C01,C06,C09,C12 --native",
		},
	})
}

// runtimeInfo is what a dockerd says of its runsc runtime, and runsc of itself.
type runtimeInfo struct {
	Path, Version, Platform string
}

// gvisorRuntime asks the dockerd at host for its runsc runtime: an error
// saying how to get one when it has none. The version is `runsc --version`
// when host is a unix socket (a dockerd of this machine, whose runtime
// path is one here too); the platform is its --platform runtime argument.
func gvisorRuntime(ctx context.Context, cli client.APIClient, host string) (*runtimeInfo, error) {
	info, err := cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the dockerd at %s for its runtimes: %w", host, err)
	}
	rt, ok := info.Runtimes[GVisorRuntime]
	if !ok {
		have := slices.Sorted(maps.Keys(info.Runtimes))
		return nil, fmt.Errorf("the dockerd at %s has no runtime %q (it has %s): %s", host, GVisorRuntime, strings.Join(have, ", "), gvisorFix)
	}
	ri := &runtimeInfo{Path: rt.Path, Platform: runscPlatform(rt.Args), Version: "unknown"}
	if strings.HasPrefix(host, "unix://") && filepath.IsAbs(rt.Path) {
		vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(vctx, rt.Path, "--version").Output()
		if err != nil {
			return nil, fmt.Errorf("%s --version (the dockerd's runtime %s): %w", rt.Path, GVisorRuntime, err)
		}
		ri.Version = runscVersion(string(out))
	}
	return ri, nil
}

// runscVersion is the version in `runsc --version`'s first line,
// "runsc version VERSION".
func runscVersion(out string) string {
	first, _, _ := strings.Cut(out, "\n")
	if v, ok := strings.CutPrefix(strings.TrimSpace(first), "runsc version "); ok {
		return v
	}
	return strings.TrimSpace(first)
}

// runscPlatform is the --platform among runsc's arguments, or what runsc
// takes without one.
func runscPlatform(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--platform="); ok {
			return v
		}
		if a == "--platform" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "runsc's default"
}

// gvisorIdentity is dockerd's identity with the runtime's pins: the
// Sandboxes' FUSE is gVisor's, on the host's kernel but not its FUSE.
func gvisorIdentity(ctx context.Context, host string) (*engine.Identity, error) {
	cli, err := engine.NewClient(host)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	id, err := engine.IdentifyClient(ctx, cli, GVisorName, host)
	if err != nil {
		return nil, err
	}
	ri, err := gvisorRuntime(ctx, cli, host)
	if err != nil {
		return nil, err
	}
	id.Runtime, id.RuntimeVersion, id.RuntimePlatform, id.FUSE = GVisorRuntime, ri.Version, ri.Platform, manifests.FUSEGVisor
	return id, nil
}

// RunscCheck is the doctor's check that the dockerd at host has the runsc
// runtime, with its version and platform.
func RunscCheck(ctx context.Context, host string) provision.Check {
	c := provision.Check{Name: "runsc", Fix: gvisorFix}
	cli, err := engine.NewClient(host)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ri, err := gvisorRuntime(ctx, cli, host)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	return provision.Check{Name: "runsc", OK: true, Detail: fmt.Sprintf("the dockerd at %s has runtime %s: %s, version %s, platform %s", host, GVisorRuntime, ri.Path, ri.Version, ri.Platform)}
}
