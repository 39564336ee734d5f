package vmtarget_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	_ "github.com/sealbench/sealbench/provision/targets"
)

// parse adds the registered targets' flags for c to a fresh flag set and
// parses args.
func parse(t *testing.T, c provision.Command, args string) (provision.OptionSet, *pflag.FlagSet) {
	t.Helper()
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	set := provision.Flags(fl, c)
	if err := fl.Parse(strings.Fields(args)); err != nil {
		t.Fatal(err)
	}
	return set, fl
}

// The VM targets share one set of flags, made once for run and provision
// (lima, qemu, apple and microsandbox all take them), and none for the
// commands that make no target; --allow-untested-tool names each VM
// target's checked releases.
func TestVMFlags(t *testing.T) {
	for args, want := range map[string]vmtarget.Flags{
		"":                             {},
		"--allow-untested-tool":        {AllowUntestedTool: true},
		"--vm-cpus 3 --vm-memory 1024": {CPUs: 3, MemoryMiB: 1024},
	} {
		set, fl := parse(t, provision.CommandRun, args)
		if got := provision.OptionsOf[vmtarget.Flags](set); *got != want || set.Check() != nil {
			t.Errorf("%q: %+v (check %v), want %+v", args, *got, set.Check(), want)
		}
		usage := fl.Lookup("allow-untested-tool").Usage
		for _, tool := range []string{"apple: container 1.0.0 to 1.2.2", "microsandbox: msb 0.6.8 to 0.6.14"} {
			if !strings.Contains(usage, tool) {
				t.Errorf("the flag's help does not name %q: %s", tool, usage)
			}
		}
	}
	if got := provision.OptionsOf[vmtarget.Flags](provision.OptionSet{}); got.MemoryBytes() != 0 || got.CPUs != 0 {
		t.Errorf("no flags at all: %+v, want the provisioners' defaults", got)
	}
	for _, args := range []string{"--vm-cpus -1", "--vm-cpus 2000", "--vm-memory 100"} {
		set, _ := parse(t, provision.CommandProvision, args)
		var ue *provision.UsageError
		if err := set.Check(); err == nil || !strings.Contains(err.Error(), strings.Fields(args)[0]) || !errors.As(err, &ue) || ue.Hint == "" {
			t.Errorf("%q: check %v, want a usage error naming the flag, with a hint", args, err)
		}
	}
	_, fl := parse(t, provision.CommandAudit, "")
	if fl.Lookup("vm-cpus") != nil {
		t.Error("audit takes --vm-cpus: it makes no VM")
	}
}
