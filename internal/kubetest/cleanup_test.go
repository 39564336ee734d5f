//go:build linux

package kubetest

import (
	"slices"
	"testing"
)

// TestSplitRule: a rule of `iptables -S` splits into the arguments that
// delete it again, a quoted comment as one.
func TestSplitRule(t *testing.T) {
	for line, want := range map[string][]string{
		`-A INPUT -j KUBE-FIREWALL`: {"-A", "INPUT", "-j", "KUBE-FIREWALL"},
		`-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`: {
			"-A", "KUBE-FIREWALL", "!", "-s", "127.0.0.0/8", "-d", "127.0.0.0/8", "-m", "comment", "--comment",
			"block incoming localnet connections", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP"},
		`-A X -m comment --comment "a \"quoted\" word" -j Y`: {"-A", "X", "-m", "comment", "--comment", `a "quoted" word`, "-j", "Y"},
		`-A X -m comment --comment "" -j Y`:                  {"-A", "X", "-m", "comment", "--comment", "", "-j", "Y"},
		``:                                                   nil,
	} {
		if got := splitRule(line); !slices.Equal(got, want) {
			t.Errorf("splitRule(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestInCgroup: a process is the cluster's when any of its hierarchies
// puts it at or below the cluster's cgroup root, and not when a name
// merely starts the same.
func TestInCgroup(t *testing.T) {
	const root = "/sealbench-kube-ab12"
	for cg, want := range map[string]bool{
		"4:memory:/sealbench-kube-ab12/kubepods/besteffort/pod1\n0::/\n": true,
		"4:memory:/sealbench-kube-ab12\n":                                true,
		"4:memory:/sealbench-kube-ab123/kubepods\n":                      false,
		"9:name=systemd:/\n4:memory:/process_api/x\n0::/\n":              false,
		"0::/sealbench-kube-ab12/kubepods\n":                             true,
	} {
		if got := inCgroup(cg, root); got != want {
			t.Errorf("inCgroup(%q) = %v, want %v", cg, got, want)
		}
	}
}
