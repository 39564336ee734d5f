package microsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/provision"
)

// What msb needs of its host, from superradcompany/microsandbox's README
// at v0.6.14 ("macOS: Apple Silicon. Linux: KVM enabled."), its own
// doctor (sdk/rust/lib/setup/linux.rs: /dev/kvm present, and opened for
// reading and writing by the user, which is what libkrun does) and its
// Linux release builds, whose glibc floor moved: up to v0.6.10 they were
// built on ubuntu-latest (24.04) and need GLIBC_2.39 symbols; from v0.6.11
// they are built in manylinux 2.28 containers and checked to need nothing
// newer than glibc 2.28 (.github/workflows/release-linux.yml,
// LINUX_GLIBC_BASELINE; #1401, "lower Linux glibc baseline to 2.28",
// whose test plan shows the 0.6.10 binaries requiring GLIBC_2.39).

// Names of the doctor's checks for microsandbox's host.
const (
	KVMCheckName   = "msb-kvm"   // Linux
	GlibcCheckName = "msb-glibc" // Linux
	HostCheckName  = "msb-host"  // elsewhere: macOS on Apple silicon
)

// glibcFloors: the oldest glibc msb's Linux builds run on, by release.
var glibcFloors = []struct {
	from  toolexec.Version // this release and later ones
	floor GlibcVersion
}{
	{toolexec.MustVersion("0.6.11"), GlibcVersion{2, 28}},
	{toolexec.Version{}, GlibcVersion{2, 39}},
}

// GlibcFloor is the oldest glibc that msb release v's Linux builds run
// on.
func GlibcFloor(v toolexec.Version) GlibcVersion {
	for _, f := range glibcFloors {
		if !v.Less(f.from) {
			return f.floor
		}
	}
	return glibcFloors[len(glibcFloors)-1].floor
}

// GlibcVersion is a glibc release: 2.36.
type GlibcVersion struct{ Major, Minor int }

func (g GlibcVersion) String() string { return fmt.Sprintf("%d.%d", g.Major, g.Minor) }

// Less reports whether g is older than h.
func (g GlibcVersion) Less(h GlibcVersion) bool {
	return g.Major < h.Major || (g.Major == h.Major && g.Minor < h.Minor)
}

// ErrNotGlibc is what ParseGlibcVersion answers for a C library that is
// not glibc (musl's ldd, say).
var ErrNotGlibc = errors.New("the C library is not glibc")

var glibcVersion = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.\d+)?$`)

// ParseGlibcVersion reads glibc's version from the first line of `getconf
// GNU_LIBC_VERSION` ("glibc 2.36", confstr's _CS_GNU_LIBC_VERSION) or of
// `ldd --version` ("ldd (Debian GLIBC 2.36-9+deb12u14) 2.36", "ldd (GNU
// libc) 2.40"): the line names glibc, and its last word is the version.
func ParseGlibcVersion(out string) (GlibcVersion, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	low := strings.ToLower(line)
	if !strings.Contains(low, "glibc") && !strings.Contains(low, "gnu libc") {
		if strings.Contains(low, "musl") {
			return GlibcVersion{}, fmt.Errorf("%w: %q", ErrNotGlibc, line)
		}
		return GlibcVersion{}, fmt.Errorf("no glibc version in %q", line)
	}
	f := strings.Fields(line)
	m := glibcVersion.FindStringSubmatch(f[len(f)-1])
	if m == nil {
		return GlibcVersion{}, fmt.Errorf("no glibc version in %q", line)
	}
	maj, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return GlibcVersion{maj, minor}, nil
}

// HostGlibc is this host's glibc, from getconf, or else from ldd.
func HostGlibc(ctx context.Context) (GlibcVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var errs []error
	for _, argv := range [][]string{{"getconf", "GNU_LIBC_VERSION"}, {"ldd", "--version"}} {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil && len(out) == 0 {
			errs = append(errs, fmt.Errorf("%s: %w", strings.Join(argv, " "), err))
			continue
		}
		v, perr := ParseGlibcVersion(string(out))
		if perr == nil || errors.Is(perr, ErrNotGlibc) {
			return v, perr
		}
		errs = append(errs, fmt.Errorf("%s: %w", strings.Join(argv, " "), perr))
	}
	return GlibcVersion{}, errors.Join(errs...)
}

// lastOldGlibc is the last msb release built for glibc 2.39.
var lastOldGlibc = toolexec.MustVersion("0.6.10")

// glibcCheck says whether this host's glibc (host, or hostErr) runs msb:
// the release installed (have, when there is one) or else the newest
// checked, saying which of the releases sealbench drives it runs.
func glibcCheck(host GlibcVersion, hostErr error, have *toolexec.Version) provision.Check {
	c := provision.Check{Name: GlibcCheckName}
	oldFloor, newFloor := GlibcFloor(MinVersion), GlibcFloor(MaxVersion)
	oldRel := fmt.Sprintf("msb %s to %s (built on Ubuntu 24.04, they need glibc %s: GLIBC_%s symbols)", MinVersion, lastOldGlibc, oldFloor, oldFloor)
	newRel := fmt.Sprintf("msb 0.6.11 to %s (built for glibc %s)", MaxVersion, newFloor)
	if hostErr != nil {
		c.Detail = fmt.Sprintf("cannot tell this host's glibc (%v); of the releases sealbench drives, %s; %s", hostErr, oldRel, newRel)
		c.Fix = "msb's Linux builds need glibc: use a glibc distribution"
		return c
	}
	if have != nil {
		floor := GlibcFloor(*have)
		c.OK = !host.Less(floor)
		if c.OK {
			c.Detail = fmt.Sprintf("glibc %s: msb %s needs %s or newer", host, have, floor)
			return c
		}
		c.Detail = fmt.Sprintf("glibc %s, but msb %s needs glibc %s or newer; of the releases sealbench drives, %s; %s", host, have, floor, oldRel, newRel)
		if host.Less(newFloor) {
			c.Fix = "use a distribution with glibc " + newFloor.String() + " or newer"
		} else {
			c.Fix = "upgrade msb to 0.6.11 or later, built for glibc " + newFloor.String() + ": " + getMsb
		}
		return c
	}
	switch {
	case !host.Less(oldFloor):
		c.OK, c.Detail = true, fmt.Sprintf("glibc %s: enough for every msb sealbench drives, %s and %s; no msb installed to ask", host, oldRel, newRel)
	case !host.Less(newFloor):
		c.OK, c.Detail = true, fmt.Sprintf("glibc %s: enough for %s, not for %s; no msb installed to ask", host, newRel, oldRel)
	default:
		c.Detail = fmt.Sprintf("glibc %s: too old for every msb sealbench drives: %s; %s", host, newRel, oldRel)
		c.Fix = "use a distribution with glibc " + newFloor.String() + " or newer"
	}
	return c
}

// kvmCheck is msb's own check of /dev/kvm (setup/linux.rs): there, and
// open for reading and writing by this user.
func kvmCheck(dev string) provision.Check {
	c := provision.Check{Name: KVMCheckName}
	if _, err := os.Stat(dev); err != nil {
		c.Detail = fmt.Sprintf("%s is not there: %v", dev, err)
		c.Fix = "enable virtualization (VT-x, AMD-V, or nested virtualization in a VM) and load kvm_intel or kvm_amd (sudo modprobe kvm_intel); in a container, the host must pass " + dev + " through"
		return c
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		c.Detail = fmt.Sprintf("%s does not open for reading and writing: %v", dev, err)
		c.Fix = "give this user access: sudo usermod -aG kvm $USER (then log in again), or sudo setfacl -m u:$USER:rw " + dev
		return c
	}
	f.Close()
	c.OK = true
	c.Detail = dev + " opens for reading and writing, as libkrun needs (no microVM was started to test it)"
	return c
}

// hostChecks are the doctor's checks of what msb needs of this host: on
// Linux, KVM and glibc (for the msb installed, when there is one); on
// macOS, Apple silicon.
func hostChecks(ctx context.Context) []provision.Check {
	switch runtime.GOOS {
	case "linux":
		var have *toolexec.Version
		if p, err := spec.Find(""); err == nil {
			if v, _, err := spec.CheckVersion(ctx, &toolexec.Tool{Path: p}, true); err == nil || errors.Is(err, ErrToolTooOld) {
				have = &v
			}
		}
		g, err := HostGlibc(ctx)
		return []provision.Check{kvmCheck("/dev/kvm"), glibcCheck(g, err, have)}
	case "darwin":
		if runtime.GOARCH == "arm64" {
			return []provision.Check{{Name: HostCheckName, OK: true, Detail: "macOS on Apple silicon"}}
		}
		return []provision.Check{{Name: HostCheckName, Detail: "this host is " + runtime.GOOS + "/" + runtime.GOARCH, Fix: "msb runs on macOS only on Apple silicon"}}
	}
	return []provision.Check{{Name: HostCheckName, Detail: "this host is " + runtime.GOOS, Fix: "msb runs on Linux with KVM or macOS on Apple silicon (sealbench's microsandbox target is not built for Windows)"}}
}

// hostNeeds are the names of hostChecks' checks on this OS.
func hostNeeds() []string {
	if runtime.GOOS == "linux" {
		return []string{KVMCheckName, GlibcCheckName}
	}
	return []string{HostCheckName}
}
