//go:build linux

package kubetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/sealbench/sealbench/internal/mountinfo"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// The kernel settings a kubelet sets for as long as it runs
// (protectKernelDefaults off); Stop puts the machine's values back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// Paths outside the cluster's directory that a kubelet or a containerd
// writes whatever their configuration: the kubelet's container log links
// (/var/log/containers), the shims' sockets (/run/containerd/s), CNI's
// cache of results (/var/lib/cni), and the defaults a misconfiguration
// would fall back to (pods' network namespaces in /run/netns).
var globalPaths = []string{"/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/etc/kubernetes",
	"/var/run/kubernetes", "/run/containerd", "/var/lib/containerd", "/etc/cni", "/opt/cni", "/var/lib/cni",
	"/run/netns", "/var/run/netns"}

// shimSockets is where containerd 1.6 puts its shims' sockets, whatever
// its state directory.
const shimSockets = "/run/containerd/s"

// hostState is what of the machine's own state a cluster changes, as it
// was before it started. Start writes it to the cluster's directory
// (before.json), whence sweepStale puts back what a dead cluster changed.
type hostState struct {
	Chains  map[string]bool   `json:"chains"`  // "iptables -t nat KUBE-X"
	Sysctls map[string]string `json:"sysctls"` // kubeletSysctls' values
	Paths   map[string]bool   `json:"paths"`   // which globalPaths existed
	Shims   map[string]bool   `json:"shims"`   // shimSockets' entries
	Run     map[string]bool   `json:"run"`     // /run/containerd's entries
}

// recorded says whether the state was read (or loaded): without it,
// nothing of the machine's may be put back or removed.
func (s hostState) recorded() bool { return s.Sysctls != nil }

func readHostState(iptables string) (hostState, error) {
	s := hostState{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	var err error
	if s.Chains, err = kubeChains(iptables); err != nil {
		return s, err
	}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return s, err
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	for _, p := range globalPaths {
		if _, err := os.Lstat(p); err == nil {
			s.Paths[p] = true
		}
	}
	s.Shims, s.Run = dirNames(shimSockets), dirNames(filepath.Dir(shimSockets))
	return s, nil
}

// dirNames is the set of the names in a directory (none when it is not there).
func dirNames(dir string) map[string]bool {
	names := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		names[e.Name()] = true
	}
	return names
}

// iptablesCommands are iptables and, when there is one, ip6tables.
func iptablesCommands(iptables string) []string {
	cmds := []string{iptables}
	if p, err := exec.LookPath("ip6tables"); err == nil {
		cmds = append(cmds, p)
	}
	return cmds
}

var iptablesTables = []string{"filter", "nat", "mangle"}

// kubeChains lists the KUBE-* chains of every table, as "CMD -t TABLE CHAIN".
func kubeChains(iptables string) (map[string]bool, error) {
	chains := map[string]bool{}
	for _, cmd := range iptablesCommands(iptables) {
		for _, table := range iptablesTables {
			out, err := exec.Command(cmd, "-w", "-t", table, "-S").Output()
			if err != nil {
				return nil, fmt.Errorf("%s -t %s -S: %w", cmd, table, err)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-") {
					chains[cmd+" -t "+table+" "+f[1]] = true
				}
			}
		}
	}
	return chains, nil
}

// cgroupMounts are the mount points of every cgroup hierarchy, v1 and v2.
func cgroupMounts() []string {
	var mps []string
	all, _ := mountinfo.Read()
	for _, m := range all {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			mps = append(mps, m.Point)
		}
	}
	return mps
}

// makeCgroupRoot creates the kubelet's cgroup root in every v1 hierarchy
// (the kubelet wants it to exist), with a cpuset's CPUs and memory nodes
// copied from the hierarchy's root.
func (c *Cluster) makeCgroupRoot() error {
	all, err := mountinfo.Read()
	if err != nil {
		return err
	}
	for _, m := range all {
		if m.FSType != "cgroup" {
			continue
		}
		d := filepath.Join(m.Point, c.CgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m.Point, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// Stop stops the cluster and removes what it made (see the package
// doc), and releases the machine-wide lock. What it could not remove is
// in its error, and in Leftovers.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	t0 := time.Now()
	var errs []error
	c.stopProc("kubelet")
	c.stopProc(AgentSandboxController)
	if c.stopFUSE != nil {
		c.stopFUSE()
	}
	// The containers' tasks, through containerd while it runs: deleting a
	// task kills it, unmounts its root filesystem and ends its shim, which
	// removes its socket. This is the orderly way, not the proof: a task
	// whose shim ends as it is deleted answers "ttrpc: closed", and
	// removeLocal then kills and unmounts what is left. Leftovers is the
	// proof, so these errors count only when something is left.
	var taskErrs []error
	if c.running("containerd") {
		if out, err := c.ctr("tasks", "ls", "-q"); err != nil {
			taskErrs = append(taskErrs, err)
		} else {
			for _, id := range strings.Fields(string(out)) {
				// One that exits meanwhile is "not found".
				if _, err := c.ctr("tasks", "delete", "--force", id); err != nil && !strings.Contains(err.Error(), "not found") {
					taskErrs = append(taskErrs, err)
				}
			}
		}
	}
	for _, name := range []string{"containerd", "kube-apiserver", "etcd"} {
		c.stopProc(name)
	}
	errs = append(errs, c.cleanUp()...)
	if c.unlock != nil {
		c.unlock()
	}
	c.Stopped = time.Since(t0)
	if left := c.Leftovers(); left != nil {
		errs = append(errs, taskErrs...)
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// cleanUp removes what the cluster made once its processes are stopped
// (or dead): what is left of them, its mounts and cgroups (removeLocal),
// the iptables chains and kernel settings as they were before it
// (c.before), what it wrote outside its directory, and the directory.
func (c *Cluster) cleanUp() []error {
	var errs []error
	if !c.before.recorded() {
		// Stopped (or dead) before it read the machine's state, so before
		// it changed any: its own things only.
		errs = append(errs, c.removeLocal()...)
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
		return errs
	}
	errs = append(errs, c.removeLocal()...)
	if err := c.removeChains(); err != nil {
		errs = append(errs, err)
	}
	for k, v := range c.before.Sysctls {
		if b, _ := os.ReadFile("/proc/sys/" + k); strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("putting %s back to %s: %w", k, v, err))
			}
		}
	}
	for _, p := range c.strayPaths() {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	// The parents of what the cluster created, when it created them and
	// they are empty now.
	for _, p := range []string{shimSockets, filepath.Dir(shimSockets)} {
		if !c.before.Paths[filepath.Dir(shimSockets)] {
			os.Remove(p)
		}
	}
	if c.Dir != "" {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// removeLocal kills what is left of the cluster's processes, unmounts
// what is left under its directory and removes its cgroups.
func (c *Cluster) removeLocal() []error {
	var errs []error
	if err := c.killStragglers(); err != nil {
		errs = append(errs, err)
	}
	// Mounts under the directory, the deepest first.
	ms, err := mountinfo.Under(c.Dir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range ms {
		if err := syscall.Unmount(m.Point, 0); err != nil {
			if err := syscall.Unmount(m.Point, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m.Point, err))
			}
		}
	}
	for _, mp := range cgroupMounts() {
		if err := removeCgroupTree(filepath.Join(mp, c.CgroupRoot)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// sweepStale removes what the clusters of test binaries that died left
// in dir (os.TempDir): their processes (the containers' shims outlive the
// binary), mounts, cgroups, iptables chains and kernel settings (as their
// before.json says they were), the files they left outside their
// directories, and the directories. It must hold the machine lock, under
// which every cluster directory is a dead one's. It returns the
// directories it swept.
func sweepStale(dir, iptables string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(dir, dirPrefix+"*"))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, d := range dirs {
		stale := &Cluster{Dir: d, CgroupRoot: cgroupRootOf(d), tools: Tools{Iptables: iptables}}
		os.Remove(filepath.Join(pluginapi.DevicePluginPath, fusePluginSocket(d)))
		// None (dead before it changed anything of the machine's) leaves
		// stale.before unrecorded.
		if b, err := os.ReadFile(filepath.Join(d, beforeFile)); err == nil {
			json.Unmarshal(b, &stale.before)
		}
		errs = append(errs, stale.cleanUp()...)
	}
	return dirs, errors.Join(errs...)
}

// beforeFile, in a cluster's directory, is its hostState, as JSON.
const beforeFile = "before.json"

// dirPrefix starts the name of every cluster's directory; the rest of it
// names its cgroup root (cgroupRootOf).
const dirPrefix = "sb-kube-"

// cgroupRootOf is the kubelet's cgroup root of the cluster in dir.
func cgroupRootOf(dir string) string {
	return "/sealbench-kube-" + strings.TrimPrefix(filepath.Base(dir), dirPrefix)
}

// running says whether the process name was started and has not exited.
func (c *Cluster) running(name string) bool {
	for _, p := range c.procs {
		if p.name == name {
			select {
			case <-p.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// stopProc stops the process name: SIGTERM, and SIGKILL after 15 seconds.
func (c *Cluster) stopProc(name string) {
	for _, p := range c.procs {
		if p.name != name {
			continue
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// ours lists the processes the cluster left: those in a cgroup under its
// root, and those whose command line names its directory (the shims).
func (c *Cluster) ours() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if (c.Dir != "" && bytes.Contains(cmdline, []byte(c.Dir+"/"))) || inCgroup(string(cg), c.CgroupRoot) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func inCgroup(procCgroup, root string) bool {
	for _, line := range strings.Split(procCgroup, "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && under(parts[2], root) {
			return true
		}
	}
	return false
}

// killStragglers SIGKILLs what ours finds until nothing is left, for up
// to ten seconds.
func (c *Cluster) killStragglers() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := c.ours()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes the cluster started outlived SIGKILL: %v", pids)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroupTree removes a cgroup and every cgroup below it, the
// deepest first, retrying while the last processes leave them.
func removeCgroupTree(root string) error {
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		var err error
		for range 50 {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("removing cgroup %s: %w", d, err)
		}
	}
	return nil
}

// removeChains removes the KUBE-* chains the cluster added, and the
// rules of other chains that jump to them first.
func (c *Cluster) removeChains() error {
	now, err := kubeChains(c.tools.Iptables)
	if err != nil {
		return err
	}
	var errs []error
	for _, cmd := range iptablesCommands(c.tools.Iptables) {
		for _, table := range iptablesTables {
			var added []string
			for ch := range now {
				if prefix := cmd + " -t " + table + " "; strings.HasPrefix(ch, prefix) && !c.before.Chains[ch] {
					added = append(added, strings.TrimPrefix(ch, prefix))
				}
			}
			if len(added) == 0 {
				continue
			}
			out, err := exec.Command(cmd, "-w", "-t", table, "-S").Output()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, line := range strings.Split(string(out), "\n") {
				args := splitRule(line)
				if len(args) < 2 || args[0] != "-A" || slices.Contains(added, args[1]) {
					continue
				}
				if j := slices.Index(args, "-j"); j < 0 || j+1 >= len(args) || !slices.Contains(added, args[j+1]) {
					continue
				}
				args[0] = "-D"
				if out, err := exec.Command(cmd, append([]string{"-w", "-t", table}, args...)...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s %s: %v: %s", cmd, table, strings.Join(args, " "), err, out))
				}
			}
			for _, op := range []string{"-F", "-X"} {
				for _, ch := range added {
					if out, err := exec.Command(cmd, "-w", "-t", table, op, ch).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s -t %s %s %s: %v: %s", cmd, table, op, ch, err, out))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// splitRule splits a line of `iptables -S` into arguments, a quoted
// comment as one.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	quoted, in := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && quoted && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			quoted, in = !quoted, true
		case ch == ' ' && !quoted:
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		args = append(args, cur.String())
	}
	return args
}

// strayPaths are what the cluster made outside its directory and has not
// removed: globalPaths that did not exist before it, links into its
// directory in those that did, and dead shim sockets that are new.
func (c *Cluster) strayPaths() []string {
	var stray []string
	for _, p := range globalPaths {
		if p == filepath.Dir(shimSockets) {
			continue
		}
		if !c.before.Paths[p] {
			if _, err := os.Lstat(p); err == nil {
				stray = append(stray, p)
			}
			continue
		}
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(p, e.Name())); err == nil && c.Dir != "" && under(l, c.Dir) {
				stray = append(stray, filepath.Join(p, e.Name()))
			}
		}
	}
	if c.before.Paths[cniCache] {
		stray = append(stray, c.cniCacheEntries()...)
	}
	// Another containerd (a private dockerd's) puts its shims' sockets in
	// the same place: only the new ones that nothing answers are ours.
	ents, _ := os.ReadDir(shimSockets)
	for _, e := range ents {
		p := filepath.Join(shimSockets, e.Name())
		if c.before.Shims[e.Name()] {
			continue
		}
		if conn, err := net.DialTimeout("unix", p, time.Second); err == nil {
			conn.Close()
			continue
		}
		stray = append(stray, p)
	}
	return stray
}

// cniCache is where CNI (libcni, in containerd) caches each sandbox's
// result per network, whatever containerd's configuration says; a
// sandbox's teardown removes its entries.
const cniCache = "/var/lib/cni"

// cniCacheEntries are the files in cniCache that the cluster's sandboxes
// left: those whose cached result names a network namespace under its
// directory (containerd's state).
func (c *Cluster) cniCacheEntries() []string {
	var ours []string
	filepath.WalkDir(cniCache, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || c.Dir == "" {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(`"`+c.Dir+"/")) {
			ours = append(ours, p)
		}
		return nil
	})
	return ours
}

// Leftovers lists what of the cluster is still there: processes, mounts,
// cgroups, iptables chains, changed kernel settings, files outside its
// directory, the directory itself. After Stop it should be empty.
func (c *Cluster) Leftovers() []string {
	left := c.localLeftovers()
	if !c.before.recorded() {
		sort.Strings(left)
		return left
	}
	if now, err := kubeChains(c.tools.Iptables); err != nil {
		left = append(left, "iptables chains unknown: "+err.Error())
	} else {
		for ch := range now {
			if !c.before.Chains[ch] {
				left = append(left, "iptables chain "+ch)
			}
		}
	}
	for k, v := range c.before.Sysctls {
		if b, _ := os.ReadFile("/proc/sys/" + k); strings.TrimSpace(string(b)) != v {
			left = append(left, fmt.Sprintf("sysctl %s is %s, was %s", k, strings.TrimSpace(string(b)), v))
		}
	}
	for _, p := range c.strayPaths() {
		left = append(left, "file "+p)
	}
	// What a misconfigured shim or runc would keep in containerd's default
	// state directory (Stop leaves it: another containerd may own it).
	for name := range dirNames(filepath.Dir(shimSockets)) {
		if !c.before.Run[name] && name != filepath.Base(shimSockets) {
			left = append(left, "file "+filepath.Join(filepath.Dir(shimSockets), name))
		}
	}
	sort.Strings(left)
	return left
}

// localLeftovers is what removeLocal and the directory's removal leave:
// processes, mounts, cgroups, the directory.
func (c *Cluster) localLeftovers() []string {
	var left []string
	for _, pid := range c.ours() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		left = append(left, fmt.Sprintf("process %d (%s)", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
	}
	ms, err := mountinfo.Under(c.Dir)
	if err != nil {
		left = append(left, "mounts unknown: "+err.Error())
	}
	for _, m := range ms {
		left = append(left, "mount "+m.Point)
	}
	for _, mp := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(mp, c.CgroupRoot)); err == nil {
			left = append(left, "cgroup "+filepath.Join(mp, c.CgroupRoot))
		}
	}
	if _, err := os.Stat(c.Dir); err == nil {
		left = append(left, "directory "+c.Dir)
	}
	return left
}

// under says whether p is dir or below it.
func under(p, dir string) bool {
	if dir == "" || dir == "/" {
		return false
	}
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
