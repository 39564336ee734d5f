//go:build !sealbench_bundle

package cmd

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/orchestrate"
)

// fuseURingEnv sets --fuse-uring's default where it is set (auto, on or
// off): for a shell, or a test suite, that runs many runs.
const fuseURingEnv = "SEALBENCH_FUSE_URING"

// fuseURingHelp is --fuse-uring's help, for run and provision.
const fuseURingHelp = "FUSE over io_uring for LayerFS on this host's kernel (local, docker): auto turns the host's enable_uring (kernel-wide) on " +
	"for the run where the kernel has it and we are root, and puts it back once no run relies on it; on does so or refuses; " +
	"off leaves it and serves LayerFS over /dev/fuse. Bare --fuse-uring is on; the default is $" + fuseURingEnv + ", or auto"

// fuseURingFlag is --fuse-uring: auto, on or off (bare: on).
type fuseURingFlag struct{ mode orchestrate.FUSEURing }

func (f *fuseURingFlag) String() string { return f.mode.String() }
func (f *fuseURingFlag) Type() string   { return strings.Join(orchestrate.FUSEURingValues, "|") }
func (f *fuseURingFlag) Set(s string) error {
	m, err := orchestrate.ParseFUSEURing(s)
	if err != nil {
		return err
	}
	f.mode = m
	return nil
}

// addFUSEURingFlag adds --fuse-uring to fl, its default from
// $SEALBENCH_FUSE_URING (an unknown value there is refused when the
// command runs: check).
func addFUSEURingFlag(fl *pflag.FlagSet, f *fuseURingFlag) {
	f.mode = orchestrate.FUSEURingAuto
	if v := os.Getenv(fuseURingEnv); v != "" {
		if m, err := orchestrate.ParseFUSEURing(v); err == nil {
			f.mode = m
		}
	}
	fl.Var(f, "fuse-uring", fuseURingHelp)
	fl.Lookup("fuse-uring").NoOptDefVal = "on"
}

// check refuses, before anything is opened or started, an unknown
// $SEALBENCH_FUSE_URING (which would otherwise go unnoticed), and
// --fuse-uring=on where it cannot be honoured for targets (or the Engine
// at endpoint): orchestrate.CheckFUSEURing.
func (f *fuseURingFlag) check(targets []string, endpoint string) error {
	if v := os.Getenv(fuseURingEnv); v != "" {
		if _, err := orchestrate.ParseFUSEURing(v); err != nil {
			return usageErrorf("set it to auto, on or off, or unset it (the default is auto)", "$%s: %v", fuseURingEnv, err)
		}
	}
	if f.mode == orchestrate.FUSEURingOn {
		return orchestrate.CheckFUSEURing(targets, endpoint)
	}
	return nil
}
