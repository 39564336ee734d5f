package lima

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lima-vm/lima/pkg/limayaml"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
)

// testConfig is a fixed instance config: its YAML is a golden file.
func testConfig(vmType, arch string) *InstanceConfig {
	img := "/var/lib/sealbench-lima/20261129T093949-97ebfd/image/"
	return &InstanceConfig{
		VMType: vmType, Arch: arch, CPUs: 2, MemoryBytes: 2 << 30, DiskBytes: 8 << 30,
		Disk:          File{img + "disk.qcow2", manifests.DigestOf([]byte("disk"))},
		Kernel:        File{img + "vmlinuz", manifests.DigestOf([]byte("kernel"))},
		Initrd:        File{img + "initrd.img", manifests.DigestOf([]byte("initrd"))},
		KernelCmdline: "root=/dev/vda rw console=ttyS0 net.ifnames=0",
		HostSocket:    "/var/lib/sealbench-lima/20261129T093949-97ebfd/lima/sb/sock/engine.sock",
	}
}

// isolateLimaHome points Lima's loader at an empty LIMA_HOME, so that no
// default.yaml or override.yaml of this machine's user changes what is
// validated.
func isolateLimaHome(t *testing.T) {
	t.Setenv("LIMA_HOME", t.TempDir())
}

func TestInstanceYAMLGolden(t *testing.T) {
	isolateLimaHome(t)
	for _, tc := range []struct{ golden, vmType, arch string }{
		{"qemu-x86_64.yaml", limayaml.QEMU, limayaml.X8664},
		{"vz-aarch64.yaml", limayaml.VZ, limayaml.AARCH64},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			b, err := InstanceYAML(testConfig(tc.vmType, tc.arch))
			if err != nil {
				t.Fatal(err)
			}
			testenv.Golden(t, tc.golden, b)
			if native, _ := LimaArch(runtime.GOARCH); tc.vmType == limayaml.VZ && tc.arch != native {
				return // Lima validates vz only for the host's own architecture
			}
			if err := ValidateYAML(b, filepath.Join(t.TempDir(), "sb")); err != nil {
				t.Errorf("Lima's validation: %v", err)
			}
		})
	}
}

// TestInstanceYAMLAsLimaSeesIt loads the YAML with Lima's own loader (its
// defaults filled in, as limactl does) and checks what the VM will be.
func TestInstanceYAMLAsLimaSeesIt(t *testing.T) {
	isolateLimaHome(t)
	c := testConfig(limayaml.QEMU, limayaml.X8664)
	b, err := InstanceYAML(c)
	if err != nil {
		t.Fatal(err)
	}
	y, err := limayaml.Load(b, filepath.Join(t.TempDir(), "sb", "lima.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *y.VMType != limayaml.QEMU || *y.CPUs != 2 || *y.Memory != "2048MiB" || *y.Disk != "8192MiB" {
		t.Errorf("vmType %s, cpus %d, memory %s, disk %s", *y.VMType, *y.CPUs, *y.Memory, *y.Disk)
	}
	if got := y.CPUType[limayaml.X8664]; got != "qemu64" {
		t.Errorf("cpuType x86_64 is %q: under TCG it must be max, never host", got)
	}
	if !*y.Firmware.LegacyBIOS {
		t.Error("firmware.legacyBIOS is off: the image has no bootloader for UEFI")
	}
	if len(y.Mounts) != 0 {
		t.Errorf("host mounts: %+v", y.Mounts)
	}
	if *y.Containerd.System || *y.Containerd.User {
		t.Error("containerd is on")
	}
	if *y.User.Name != GuestUser || *y.User.UID != GuestUID || *y.User.Home != GuestHome {
		t.Errorf("guest user %s uid %d home %s", *y.User.Name, *y.User.UID, *y.User.Home)
	}
	if *y.HostResolver.Enabled || *y.PropagateProxyEnv {
		t.Error("the host resolver or proxy propagation is on")
	}
	if len(y.Networks) != 0 {
		t.Errorf("networks %+v: only Lima's user-mode network (loopback on the host) is wanted", y.Networks)
	}
	img := y.Images[0]
	if img.Digest.String() != c.Disk.Digest.String() || img.Kernel.Digest.String() != c.Kernel.Digest.String() ||
		img.Initrd.Digest.String() != c.Initrd.Digest.String() || img.Kernel.Cmdline != c.KernelCmdline {
		t.Errorf("image %+v, kernel %+v, initrd %+v: digests or cmdline lost", img.File, img.Kernel, img.Initrd)
	}
	// The socket forward comes first; every TCP port after it is ignored.
	if len(y.PortForwards) < 2 {
		t.Fatalf("port forwards: %+v", y.PortForwards)
	}
	if pf := y.PortForwards[0]; pf.GuestSocket != GuestEngineSocket || pf.HostSocket != c.HostSocket {
		t.Errorf("first port forward %+v, want %s -> %s", pf, GuestEngineSocket, c.HostSocket)
	}
	if pf := y.PortForwards[1]; !pf.Ignore || pf.GuestPortRange != [2]int{1, 65535} || !pf.GuestIP.IsUnspecified() {
		t.Errorf("second port forward %+v, want every port on every guest address ignored", pf)
	}
	if len(y.Probes) != 1 || !strings.Contains(y.Probes[0].Script, "/dev/fuse") {
		t.Errorf("probes: %+v", y.Probes)
	}
}

func TestInstanceConfigValidateNamesEveryField(t *testing.T) {
	err := (&InstanceConfig{VMType: "kvm", Arch: "mips", Disk: File{Path: "disk.qcow2"}}).Validate()
	if err == nil {
		t.Fatal("an empty config is valid")
	}
	for _, field := range []string{"VMType", "Arch", "CPUs", "MemoryBytes", "DiskBytes", "Disk.Path", "Disk.Digest",
		"Kernel.Path", "Initrd.Digest", "KernelCmdline", "HostSocket"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("the error does not name %s:\n%v", field, err)
		}
	}
	if _, err := InstanceYAML(&InstanceConfig{}); err == nil {
		t.Error("InstanceYAML accepts an invalid config")
	}
}

// TestValidateYAMLRejects: Lima's validation runs, and its complaint is
// passed on.
func TestValidateYAMLRejects(t *testing.T) {
	isolateLimaHome(t)
	b, err := InstanceYAML(testConfig(limayaml.QEMU, limayaml.X8664))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "cpus: 2", "cpus: 2\nmemory: lots", 1)
	bad = strings.Replace(bad, "memory: 2048MiB\n", "", 1)
	if err := ValidateYAML([]byte(bad), filepath.Join(t.TempDir(), "sb")); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("memory: lots: %v", err)
	}
	if err := ValidateYAML([]byte("images: [\n"), filepath.Join(t.TempDir(), "sb")); err == nil {
		t.Error("broken YAML validates")
	}
}
