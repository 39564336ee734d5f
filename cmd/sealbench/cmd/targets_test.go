//go:build !sealbench_bundle

package cmd

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestAllowUntestedToolFlag: the flag run and provision share reaches
// host.VM, and its help names each VM target's checked releases.
func TestAllowUntestedToolFlag(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--allow-untested-tool": true} {
		var v vmSettings
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		v.flags(fl)
		if err := fl.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		if got := v.host(kubeSettings{}).AllowUntestedTool; got != want {
			t.Errorf("%q: AllowUntestedTool %v", args, got)
		}
		usage := fl.Lookup("allow-untested-tool").Usage
		for _, tool := range []string{"apple: container 1.0.0 to 1.2.2", "microsandbox: msb 0.6.8 to 0.6.14"} {
			if !strings.Contains(usage, tool) {
				t.Errorf("the flag's help does not name %q: %s", tool, usage)
			}
		}
	}
}

// TestAccelFlag: qemu's accelerator is TCG unless the user says kvm, and
// nothing else is taken.
func TestAccelFlag(t *testing.T) {
	for args, want := range map[string]string{"": "tcg", "--accel kvm": "kvm", "--accel tcg": "tcg", "--accel hvf": ""} {
		var v vmSettings
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		v.flags(fl)
		if err := fl.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		err := v.check()
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "--accel") {
				t.Errorf("%q: check %v, want a refusal naming --accel", args, err)
			}
			continue
		}
		if err != nil || v.host(kubeSettings{}).Accel != want {
			t.Errorf("%q: check %v, Accel %q, want %q", args, err, v.host(kubeSettings{}).Accel, want)
		}
	}
}
