package provision

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/machine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// Check is one thing the doctor looked at on this host.
type Check struct {
	// Host is the remote host looked at (ssh://user@host:port); empty
	// for this one.
	Host   string `json:"host,omitempty"`
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"` // what to do when it is not OK
	// Warning is what to know about a check that is OK but moves
	// timings (free page reporting, say), and what sealbench does about it.
	Warning string `json:"warning,omitempty"`
}

// TargetReadiness says whether a target can run here, and why not.
type TargetReadiness struct {
	Target string   `json:"target"`
	Host   string   `json:"host,omitempty"` // a remote host's; empty for this one
	Ready  bool     `json:"ready"`
	Note   string   `json:"note,omitempty"`
	Needs  []string `json:"needs"` // the checks it needs
}

// DoctorReport is what the doctor found.
type DoctorReport struct {
	Checks  []Check           `json:"checks"`
	Targets []TargetReadiness `json:"targets"`
}

// Doctor looks at what this host can run: root, /dev/fuse, FUSE
// passthrough and FUSE over io_uring, then each registered target's own
// checks, in Order (Registration.Checks: dockerd; QEMU, KVM, limactl,
// mmdebstrap, apt; macOS and Apple's container; msb, with /dev/kvm and
// glibc on Linux), and says which
// registered targets are ready (Registration.Needs). It only looks: it
// changes nothing.
func Doctor(ctx context.Context) *DoctorReport {
	r := &DoctorReport{}
	seen := map[string]bool{}
	add := func(c Check) { // once: two targets may need the same thing (lima and qemu: QEMU, KVM)
		if !seen[c.Name] {
			seen[c.Name] = true
			r.Checks = append(r.Checks, c)
		}
	}

	if os.Geteuid() == 0 {
		add(Check{Name: "root", OK: true, Detail: "running as root"})
	} else {
		add(Check{Name: "root", Detail: fmt.Sprintf("running as uid %d", os.Geteuid()), Fix: "run as root (sudo): the stand-in makes mount, PID and network namespaces"})
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err == nil {
		f.Close()
		add(Check{Name: "fuse", OK: true, Detail: "/dev/fuse opens for reading and writing"})
	} else {
		add(Check{Name: "fuse", Detail: err.Error(), Fix: "load the fuse module (modprobe fuse) and run as root; in a container, pass --device /dev/fuse --cap-add SYS_ADMIN"})
	}
	add(fusePassthrough())
	add(fuseURing(runs.ReadKernelParam, os.Geteuid() == 0))
	m := machine.Probe("/")
	add(pageReporting(m))
	add(ext4Journal(m))
	for _, t := range Registered() {
		if t.Checks != nil {
			for _, c := range t.Checks(ctx) {
				add(c)
			}
		}
	}

	ok := map[string]bool{}
	for _, c := range r.Checks {
		ok[c.Name] = c.OK
	}
	ready := func(target, note string, needs ...string) {
		t := TargetReadiness{Target: target, Ready: true, Needs: needs, Note: note}
		for _, n := range needs {
			t.Ready = t.Ready && ok[n]
		}
		r.Targets = append(r.Targets, t)
	}
	for _, t := range Registered() {
		ready(t.Name, t.Note, t.Needs...)
	}
	return r
}

// ToolCheck is a doctor check of a target's own tool, made by the target's
// package: ok when err (the tool's check) is nil, else err and fix.
func ToolCheck(name string, err error, fix string) Check {
	if err == nil {
		return Check{Name: name, OK: true, Detail: "installed and answering"}
	}
	return Check{Name: name, Detail: err.Error(), Fix: fix}
}

// CommandCheck is a doctor check that name is on PATH and runs with
// versionArgs, saying the first line it prints; fix is what to do when not.
func CommandCheck(name string, versionArgs []string, fix string) Check {
	p, err := exec.LookPath(name)
	if err != nil {
		return Check{Name: name, Detail: "not on PATH", Fix: fix}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, versionArgs...).Output()
	line := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if err != nil {
		return Check{Name: name, Detail: fmt.Sprintf("%s does not run: %v", p, err), Fix: fix}
	}
	return Check{Name: name, OK: true, Detail: p + ": " + line}
}

// DockerdCheck is a doctor check that the dockerd at host answers.
func DockerdCheck(ctx context.Context, host string) Check {
	c := Check{Name: "dockerd", Fix: "start one: `scripts/dockerd start` (a private dockerd, no networking), then `eval \"$(scripts/dockerd env)\"`; or set DOCKER_HOST"}
	cli, err := engine.NewClient(host)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		c.Detail = fmt.Sprintf("%s does not answer: %v", host, err)
		return c
	}
	return Check{Name: "dockerd", OK: true, Detail: fmt.Sprintf("%s answers: Docker %s, API %s", host, v.Version, v.APIVersion)}
}

// fusePassthrough reads the kernel's config for CONFIG_FUSE_PASSTHROUGH,
// or, where the config cannot be read, judges by the version (6.9 added it).
func fusePassthrough() Check {
	c := Check{Name: "fuse-passthrough", Fix: "use a kernel 6.9 or newer built with CONFIG_FUSE_PASSTHROUGH=y; without it LayerFS reads go through the daemon (slower, still correct)"}
	var uts unix.Utsname
	unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	val, src, err := kernelConfig("CONFIG_FUSE_PASSTHROUGH", release)
	switch {
	case err == nil && val == "y":
		c.OK, c.Detail, c.Fix = true, fmt.Sprintf("CONFIG_FUSE_PASSTHROUGH=y in %s (kernel %s)", src, release), ""
	case err == nil:
		c.Detail = fmt.Sprintf("CONFIG_FUSE_PASSTHROUGH is %q in %s (kernel %s)", val, src, release)
	default:
		maj, min := kernelVersion(release)
		if maj > 6 || maj == 6 && min >= 9 {
			c.OK, c.Fix = true, ""
			c.Detail = fmt.Sprintf("probably: kernel %s is 6.9 or newer; its config is not readable (%v)", release, err)
		} else {
			c.Detail = fmt.Sprintf("kernel %s is older than 6.9, which added FUSE passthrough", release)
		}
	}
	return c
}

// fuseURing says whether LayerFS can serve its requests over FUSE over
// io_uring here (layerfsd mount --fuse-transport auto uses it where it
// can), and whether a run turns it on (as root, by default). No target
// needs it: without it LayerFS serves over /dev/fuse.
func fuseURing(read func(path string) (string, error), root bool) Check {
	c := Check{Name: "fuse-uring"}
	v, err := read(runs.FUSEURingParam)
	if err != nil {
		var uts unix.Utsname
		unix.Uname(&uts)
		c.Detail = fmt.Sprintf("kernel %s has no FUSE over io_uring (%v)", unix.ByteSliceToString(uts.Release[:]), err)
		c.Fix = "optional: a kernel 6.14 or newer built with CONFIG_FUSE_IO_URING=y lets LayerFS serve its requests over io_uring (faster on create-heavy cells); without it they go over /dev/fuse"
		return c
	}
	if v == "Y" || v == "1" {
		c.OK, c.Detail = true, runs.FUSEURingParam+" is on: LayerFS serves its requests over io_uring"
		return c
	}
	if root {
		c.OK = true
		c.Detail = runs.FUSEURingParam + " is off (the kernel's default): a run turns it on for its targets on this kernel, and puts it back once no run relies on it " +
			"(--fuse-uring=auto, the default; --fuse-uring=off serves LayerFS over /dev/fuse)"
		return c
	}
	c.Detail = runs.FUSEURingParam + " is off (the kernel's default), and turning it on for a run needs root: LayerFS serves its requests over /dev/fuse"
	c.Fix = "optional, faster on create-heavy cells: run sealbench as root (sudo), and a run turns it on for its targets on this kernel and puts it back after (--fuse-uring=auto, the default); " +
		"or as root: echo Y > " + runs.FUSEURingParam + " (kernel-wide, until reboot)"
	return c
}

// pageReporting says whether a balloon hands this machine's free memory
// back to its hypervisor, which slows writes into memory freed seconds
// earlier, and what the protocol does about it. Nothing is to be fixed:
// it is OK either way, and a warning where it is active.
func pageReporting(m manifests.Machine) Check {
	c := Check{Name: "page-reporting", OK: true}
	switch m.PageReporting {
	case manifests.PageReportingActive:
		c.Detail = "active: the virtio balloon reports free pages to the hypervisor"
		if m.ReportedKiBStart != nil {
			c.Detail += fmt.Sprintf(" (%d MiB reported so far)", *m.ReportedKiBStart>>10)
		}
		c.Warning = machine.Advice
	case manifests.PageReportingInactive:
		c.Detail = "inactive: nothing hands this machine's free memory back to a hypervisor"
	default:
		c.Detail = "unknown: a balloon may hand free memory back to the hypervisor (Hyper-V's does not say); each run's A/A check shows what noise that leaves"
	}
	return c
}

// ext4Journal warns of ext4 filesystems mounted without a journal, where
// the create-heavy cells' native reference varies with what the run
// deleted in the last minute (machine.Ext4Advice).
func ext4Journal(m manifests.Machine) Check {
	c := Check{Name: "ext4-journal", OK: true}
	if len(m.UnjournaledExt4) == 0 {
		c.Detail = "no ext4 filesystem is mounted without a journal"
		return c
	}
	c.Detail = "ext4 without a journal at " + strings.Join(m.UnjournaledExt4, ", ")
	c.Warning = machine.Ext4Advice
	return c
}

func kernelConfig(key, release string) (val, src string, err error) {
	var r io.Reader
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return "", "", err
		}
		r, src = zr, "/proc/config.gz"
	} else if f, err := os.Open("/boot/config-" + release); err == nil {
		defer f.Close()
		r, src = f, "/boot/config-"+release
	} else {
		return "", "", errors.New("neither /proc/config.gz nor /boot/config-" + release + " exists")
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v, src, nil
		}
		if line == "# "+key+" is not set" {
			return "n", src, nil
		}
	}
	return "absent", src, sc.Err()
}

func kernelVersion(release string) (int, int) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	maj, _ := strconv.Atoi(parts[0])
	min, _ := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return maj, min
}
