package qemu

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/provision"
)

// qemu's accelerator is TCG unless the user says kvm, and nothing else is
// taken; only the commands that make targets take the flag.
func TestAccelFlag(t *testing.T) {
	for args, want := range map[string]string{"": "tcg", "--accel kvm": "kvm", "--accel tcg": "tcg", "--accel hvf": ""} {
		var f Flags
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.Flags(fl, provision.CommandRun)
		if err := fl.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		err := f.Check()
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "--accel") {
				t.Errorf("%q: check %v, want a refusal naming --accel", args, err)
			}
			continue
		}
		if err != nil || f.Accel != want {
			t.Errorf("%q: check %v, Accel %q, want %q", args, err, f.Accel, want)
		}
	}
	var f Flags
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.Flags(fl, provision.CommandTeardown)
	if fl.Lookup("accel") != nil {
		t.Error("teardown takes --accel")
	}
}
