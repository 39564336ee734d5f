//go:build linux

package kubetest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
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

// TestSweepStale: what a cluster whose test binary died leaves (a
// process in its cgroup root, one naming its directory, a mount under the
// directory, cgroups in every hierarchy) the next Start sweeps away.
func TestSweepStale(t *testing.T) {
	testenv.NeedRoot(t)
	iptables := testenv.NeedCommand(t, "iptables")
	// What a sweep removes of the machine's it must not take from a live
	// cluster's kubelet.
	unlock, err := lockMachine()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	parent := t.TempDir()
	d := filepath.Join(parent, dirPrefix+"stale"+randHex(4))
	c := &Cluster{Dir: d, CgroupRoot: cgroupRootOf(d)}
	if err := os.MkdirAll(filepath.Join(d, "mnt", "deeper"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", filepath.Join(d, "mnt"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d, "mnt", "deeper"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", filepath.Join(d, "mnt", "deeper"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := c.makeCgroupRoot(); err != nil {
		t.Fatal(err)
	}
	pods := filepath.Join("/sys/fs/cgroup/pids", c.CgroupRoot, "kubepods")
	if err := os.Mkdir(pods, 0o755); err != nil {
		t.Fatal(err)
	}
	// One process in the cgroup root, one whose command line names the
	// directory, as a shim's does.
	inCgroup := exec.Command("sleep", "1000")
	naming := exec.Command("sleep", "1000")
	naming.Args[0] = filepath.Join(d, "containerd-shim")
	for _, cmd := range []*exec.Cmd{inCgroup, naming} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
	}
	if err := os.WriteFile(filepath.Join(pods, "cgroup.procs"), []byte(strconv.Itoa(inCgroup.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two processes, two mounts, the cgroup root in every v1 hierarchy,
	// the directory.
	before := c.localLeftovers()
	kinds := map[string]int{}
	for _, l := range before {
		kinds[strings.Fields(l)[0]]++
	}
	if kinds["process"] != 2 || kinds["mount"] != 2 || kinds["cgroup"] < 1 || kinds["directory"] != 1 {
		t.Fatalf("the stale cluster is not all there to sweep: %q", before)
	}

	// A second one that died after it had written the machine's state
	// (before.json) and its kubelet had added a chain, with a rule of a
	// built-in chain jumping to it.
	d2 := filepath.Join(parent, dirPrefix+"stale"+randHex(4))
	if err := os.Mkdir(d2, 0o700); err != nil {
		t.Fatal(err)
	}
	c2 := &Cluster{Dir: d2, CgroupRoot: cgroupRootOf(d2), tools: Tools{Iptables: iptables}}
	// CNI's cache was there before it (another runtime's, say), so only
	// its own entries in it are its to remove.
	results := filepath.Join(cniCache, "results")
	if _, err := os.Stat(cniCache); err != nil {
		t.Cleanup(func() { os.RemoveAll(cniCache) })
	}
	if err := os.MkdirAll(results, 0o700); err != nil {
		t.Fatal(err)
	}
	if c2.before, err = readHostState(iptables); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c2.before)
	if err := os.WriteFile(filepath.Join(d2, beforeFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	chain := "KUBE-SBTEST-" + randHex(4)
	for _, args := range [][]string{{"-N", chain}, {"-A", "OUTPUT", "-m", "comment", "--comment", "sealbench kubetest sweep", "-j", chain}} {
		if out, err := exec.Command(iptables, append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", args, err, out)
		}
	}
	// A sandbox's network namespace, mounted under containerd's state, and
	// its entry in CNI's cache, beside another runtime's.
	netns := filepath.Join(d2, "containerd", "state", "netns", "cni-"+randHex(4))
	if err := os.MkdirAll(filepath.Dir(netns), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netns, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+netns, "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare --net=%s: %v: %s", netns, err, out)
	}
	ourEntry, theirs := filepath.Join(results, "sealbench-nonet-"+randHex(4)+"-eth0"), filepath.Join(results, "other-"+randHex(4)+"-eth0")
	for p, sandbox := range map[string]string{ourEntry: netns, theirs: "/run/netns/cni-other" + randHex(4)} {
		entry := `{"kind":"cniCacheV1","result":{"interfaces":[{"name":"eth0","sandbox":"` + sandbox + `"}]}}`
		if err := os.WriteFile(p, []byte(entry), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(theirs) })
	left := c2.Leftovers()
	for _, want := range []string{"iptables chain " + iptables + " -t filter " + chain, "mount " + netns, "file " + ourEntry} {
		if !slices.Contains(left, want) {
			t.Fatalf("the second stale cluster's %s is not there to sweep: %q", want, left)
		}
	}
	if slices.Contains(left, "file "+theirs) {
		t.Errorf("another runtime's CNI cache entry counted as the cluster's: %q", left)
	}

	swept, err := sweepStale(parent, iptables)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{d, d2}; !slices.Equal(slices.Sorted(slices.Values(swept)), slices.Sorted(slices.Values(want))) {
		t.Errorf("swept %q, want %q", swept, want)
	}
	if left := c.localLeftovers(); len(left) > 0 {
		t.Errorf("left after the sweep: %q", left)
	}
	if left := c2.Leftovers(); len(left) > 0 {
		t.Errorf("left after the sweep: %q", left)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("the sweep took another runtime's CNI cache entry: %v", err)
	}
}
