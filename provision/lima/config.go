package lima

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/lima-vm/lima/pkg/limayaml"
	godigest "github.com/opencontainers/go-digest"

	"github.com/sealbench/sealbench/manifests"
)

// Guest-side names: the user Lima creates (LIMA-NOTES item 3: the default,
// a copy of the host user, collides with users the image has), and the
// socket the Engine is reached through.
const (
	GuestUser = "lima"
	GuestUID  = 1000
	GuestHome = "/home/lima.linux"
	// GuestEngineSocket is where, inside the VM, the Engine API is served
	// to the guest user, whom Lima's socket forwarding connects as (see
	// the package doc for why it is not the stand-in's own socket).
	GuestEngineSocket = "/run/sealbench-engine/engine.sock"
)

// File is one VM image file Lima boots from, with its digest.
type File struct {
	Path   string
	Digest manifests.Digest
}

// InstanceConfig is everything the instance YAML depends on: generating it
// reads nothing else, so the same settings always give the same YAML.
type InstanceConfig struct {
	// VMType is limayaml.QEMU (Linux hosts) or limayaml.VZ (macOS hosts).
	VMType string
	// Arch is Lima's name of the guest architecture: x86_64 or aarch64.
	Arch        string
	CPUs        int
	MemoryBytes int64
	DiskBytes   int64
	// Disk, Kernel and Initrd are the VM image's files; KernelCmdline
	// boots the ext4 filesystem written straight onto the disk.
	Disk, Kernel, Initrd File
	KernelCmdline        string
	// HostSocket is where the guest's Engine socket appears on the host.
	HostSocket string
}

// readinessProbe is the instance's readiness probe: Lima's `start`
// returns only once the guest has finished booting (so systemd-run works)
// and /dev/fuse exists (the Sandboxes' LayerFS needs it).
const readinessProbe = `#!/bin/bash
set -eu
state=$(systemctl is-system-running --wait || true)
case "$state" in
running|degraded) ;;
*) echo "systemd is $state" >&2; exit 1 ;;
esac
test -c /dev/fuse || { echo "no /dev/fuse" >&2; exit 1; }
`

// Validate reports every problem with c, each naming its field.
func (c *InstanceConfig) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("lima instance config: %s: "+format, append([]any{field}, args...)...))
	}
	switch c.VMType {
	case limayaml.QEMU, limayaml.VZ:
	default:
		add("VMType", "%q is not %q or %q", c.VMType, limayaml.QEMU, limayaml.VZ)
	}
	switch c.Arch {
	case limayaml.X8664, limayaml.AARCH64:
	default:
		add("Arch", "%q is not %q or %q", c.Arch, limayaml.X8664, limayaml.AARCH64)
	}
	if c.CPUs < 1 {
		add("CPUs", "is %d, want 1 or more", c.CPUs)
	}
	if c.MemoryBytes < 512<<20 {
		add("MemoryBytes", "is %d, want at least 512 MiB", c.MemoryBytes)
	}
	if c.DiskBytes < 1<<30 {
		add("DiskBytes", "is %d, want at least 1 GiB", c.DiskBytes)
	}
	for _, f := range []struct {
		name string
		f    File
	}{{"Disk", c.Disk}, {"Kernel", c.Kernel}, {"Initrd", c.Initrd}} {
		if !filepath.IsAbs(f.f.Path) {
			add(f.name+".Path", "%q is not an absolute path", f.f.Path)
		}
		if err := f.f.Digest.Validate(); err != nil {
			add(f.name+".Digest", "%v", err)
		}
	}
	if c.KernelCmdline == "" {
		add("KernelCmdline", "missing")
	}
	if !filepath.IsAbs(c.HostSocket) {
		add("HostSocket", "%q is not an absolute path", c.HostSocket)
	}
	return errors.Join(errs...)
}

// tcgCPUModel is the CPU model Lima's QEMU gets under TCG: qemu64, as the
// qemu target's (qemu.TCGCPUModel).
const tcgCPUModel = "qemu64"

// InstanceYAML returns the Lima instance YAML for c: the VM image's disk,
// kernel and initrd with their digests (Lima checks local files against
// them before it copies them), legacy BIOS (the kernel is booted directly;
// there is no bootloader), the CPU model qemu64 (QEMU under TCG: never
// "host", which needs KVM; and not "max", whose extensions TCG emulates
// slowly: a fork-heavy cell took a fifth longer on it), no host mounts, no containerd, no host DNS or
// proxy settings, every TCP port of the guest left unforwarded, and the
// guest's Engine socket forwarded to c.HostSocket.
func InstanceYAML(c *InstanceConfig) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	file := func(f File) limayaml.File {
		return limayaml.File{Location: f.Path, Arch: c.Arch, Digest: godigest.Digest(f.Digest.String())}
	}
	y := limayaml.LimaYAML{
		VMType: ptr(c.VMType),
		OS:     ptr(limayaml.LINUX),
		Arch:   ptr(c.Arch),
		Images: []limayaml.Image{{
			File:   file(c.Disk),
			Kernel: &limayaml.Kernel{File: file(c.Kernel), Cmdline: c.KernelCmdline},
			Initrd: ptr(file(c.Initrd)),
		}},
		CPUs:   ptr(c.CPUs),
		Memory: ptr(fmt.Sprintf("%dMiB", c.MemoryBytes>>20)),
		Disk:   ptr(fmt.Sprintf("%dMiB", c.DiskBytes>>20)),
		// No mounts at all: the bundle is copied in. The mount type is
		// still set, because under the default (9p, which Debian's cloud
		// kernel lacks) cloud-init's mounts module fails even with none.
		Mounts:       []limayaml.Mount{},
		MountType:    ptr(limayaml.REVSSHFS),
		MountInotify: ptr(false),
		SSH: limayaml.SSH{
			LocalPort: ptr(0), LoadDotSSHPubKeys: ptr(false),
			ForwardAgent: ptr(false), ForwardX11: ptr(false), ForwardX11Trusted: ptr(false),
		},
		Firmware:          limayaml.Firmware{LegacyBIOS: ptr(true)},
		Video:             limayaml.Video{Display: ptr("none")},
		UpgradePackages:   ptr(false),
		Containerd:        limayaml.Containerd{System: ptr(false), User: ptr(false)},
		Probes:            []limayaml.Probe{{Mode: limayaml.ProbeModeReadiness, Description: "systemd has booted and /dev/fuse exists", Script: readinessProbe}},
		HostResolver:      limayaml.HostResolver{Enabled: ptr(false)},
		PropagateProxyEnv: ptr(false),
		TimeZone:          ptr("UTC"),
		User:              limayaml.User{Name: ptr(GuestUser), UID: ptr(uint32(GuestUID)), Home: ptr(GuestHome), Shell: ptr("/bin/bash")},
		PortForwards: []limayaml.PortForward{
			{GuestSocket: GuestEngineSocket, HostSocket: c.HostSocket},
			// Nothing else: Lima would otherwise forward every port the
			// guest listens on to the host's loopback.
			{GuestIP: net.IPv4zero, GuestPortRange: [2]int{1, 65535}, Proto: limayaml.ProtoAny, Ignore: true},
		},
	}
	if c.VMType == limayaml.QEMU {
		y.CPUType = limayaml.CPUType{c.Arch: tcgCPUModel}
	}
	b, err := limayaml.Marshal(&y, false)
	if err != nil {
		return nil, fmt.Errorf("encoding the Lima instance YAML: %w", err)
	}
	return b, nil
}

// ValidateYAML checks b as limactl will: Lima's own loader fills in its
// defaults as for an instance at instDir, then Lima's validation runs.
// The loader also reads $LIMA_HOME/_config/{default,override}.yaml of the
// calling user when they exist, as limactl would.
func ValidateYAML(b []byte, instDir string) error {
	y, err := limayaml.Load(b, filepath.Join(instDir, "lima.yaml"))
	if err != nil {
		return fmt.Errorf("loading the Lima instance YAML: %w", err)
	}
	if err := limayaml.Validate(y, false); err != nil {
		return fmt.Errorf("Lima rejects the instance YAML: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// LimaArch is Lima's name for a GOARCH.
func LimaArch(goarch string) (string, error) {
	switch goarch {
	case "amd64":
		return limayaml.X8664, nil
	case "arm64":
		return limayaml.AARCH64, nil
	}
	return "", fmt.Errorf("no Lima guest architecture for GOARCH %q", goarch)
}

func ptr[T any](v T) *T { return &v }
