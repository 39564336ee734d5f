package qemu

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

func testMachine(dir string) machine {
	p := func(n string) string { return filepath.Join(dir, n) }
	return machine{Accel: AccelTCG, CPUs: 2, MemoryMiB: 2048, Kernel: p("vmlinuz"), Initrd: p("initrd.img"), Cmdline: kernelCmdline("root=/dev/vda rw", 0),
		Disk: p("disk.qcow2"), Bundle: p("bundle.tar"), Serial: p("serial.sock"), Console: p("console.log"), Pidfile: p("qemu.pid")}
}

// argAfter is the argument after the first flag in args, or "".
func argAfter(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestMachineArgs(t *testing.T) {
	m := testMachine("/run/x/qemu/vm")
	if err := m.validate(); err != nil {
		t.Fatal(err)
	}
	args := m.args()
	all := strings.Join(args, " ")
	for flag, want := range map[string]string{"-M": "microvm,rtc=on,pit=on,pic=on", "-accel": "tcg", "-cpu": "qemu64", "-smp": "2", "-m": "2048",
		"-kernel": m.Kernel, "-initrd": m.Initrd, "-append": m.Cmdline, "-serial": "file:" + m.Console, "-pidfile": m.Pidfile} {
		if got := argAfter(args, flag); got != want {
			t.Errorf("%s %q, want %q", flag, got, want)
		}
	}
	for _, want := range []string{"-nodefaults", "-no-user-config",
		"id=bundle,file=" + m.Bundle + ",format=raw,if=none,readonly=on",
		"virtio-blk-device,drive=root", "virtio-blk-device,drive=bundle,serial=" + bundleSerial,
		"virtio-serial-device", "socket,id=link,path=" + m.Serial + ",server=on,wait=off", "virtserialport,chardev=link,name=" + GuestPort} {
		if !slices.Contains(args, want) {
			t.Errorf("no %q in %s", want, all)
		}
	}
	// No network device of any kind, no PCI, no KVM.
	for _, bad := range []string{"-netdev", "-nic", "-net", "virtio-net", "pci", "kvm"} {
		if strings.Contains(all, bad) {
			t.Errorf("%q in the command line: %s", bad, all)
		}
	}
	m.Accel = AccelKVM
	if a := m.args(); argAfter(a, "-accel") != "kvm" || argAfter(a, "-cpu") != "host" {
		t.Errorf("--accel kvm gives %q", a)
	}
	for _, bad := range []func(*machine){
		func(m *machine) { m.Accel = "hvf" },
		func(m *machine) { m.CPUs = 0 },
		func(m *machine) { m.MemoryMiB = 128 },
		func(m *machine) { m.Disk = "/a,b/disk.qcow2" }, // QEMU would read b/... as another option
		func(m *machine) { m.Console = "" },
	} {
		m := testMachine("/run/x/qemu/vm")
		bad(&m)
		if m.validate() == nil {
			t.Errorf("validate accepts %+v", m)
		}
	}
}

func TestKernelCmdline(t *testing.T) {
	if c := kernelCmdline("root=/dev/vda", 2596140); !strings.Contains(c, "root=/dev/vda tsc_early_khz=2596140 ") {
		t.Errorf("the TSC's frequency is not on %q", c)
	}
	c := kernelCmdline("root=/dev/vda rw console=ttyS0", 0)
	if strings.Contains(c, "tsc_early_khz") {
		t.Errorf("tsc_early_khz without a frequency: %q", c)
	}
	for _, want := range []string{"root=/dev/vda rw console=ttyS0 ", "cloud-init=disabled",
		`systemd.run="/bin/sh -c 'tar -xOf /dev/disk/by-id/virtio-sealbench-bundle setup.sh > /run/sealbench-setup.sh && exec /bin/sh /run/sealbench-setup.sh'"`,
		"systemd.run_success_action=none", "systemd.run_failure_action=poweroff"} {
		if !strings.Contains(c, want) {
			t.Errorf("the kernel command line %q lacks %q", c, want)
		}
	}
	// systemd expands $ in the command; the command must have none.
	if strings.Contains(c, "$") {
		t.Errorf("a $ in %q", c)
	}
}

// testBundle writes a small bundle (two files, a signature) and returns
// its directory and manifest.
func testBundle(t *testing.T) (string, *manifests.BundleManifest) {
	dir := filepath.Join(t.TempDir(), "build-linux-0123456789ab")
	files := map[string]string{"bin/linux-amd64/standin": "#!/bin/true\n", "README": "hello\n"}
	m := &manifests.BundleManifest{SchemaVersion: 1}
	for _, p := range []string{"README", "bin/linux-amd64/standin"} {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
		mode := manifests.FileMode(0o644)
		if strings.HasPrefix(p, "bin/") {
			mode = 0o755
		}
		m.Files = append(m.Files, manifests.BundleFile{Path: p, Size: int64(len(files[p])), Mode: mode, Digest: manifests.DigestOf([]byte(files[p]))})
	}
	if err := os.WriteFile(filepath.Join(dir, manifests.SignatureFile), []byte("sig"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func TestBundleDisk(t *testing.T) {
	dir, m := testBundle(t)
	disk := filepath.Join(t.TempDir(), "bundle.tar")
	if err := writeBundleDisk(disk, dir, filepath.Base(dir), m); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	want := []string{"setup.sh", "bundle/", "bundle/bin/", "bundle/bin/linux-amd64/", "bundle/README", "bundle/bin/linux-amd64/standin",
		"bundle/manifest.json", "bundle/manifest.sig", "bundle/SHA256SUMS"}
	if !slices.Equal(names, want) {
		t.Errorf("the bundle disk holds %q, want %q", names, want)
	}
	if got["bundle/SHA256SUMS"] != string(m.SHA256SUMS()) || got["bundle/README"] != "hello\n" {
		t.Errorf("SHA256SUMS %q, README %q", got["bundle/SHA256SUMS"], got["bundle/README"])
	}
	setup := got["setup.sh"]
	for _, w := range []string{"sha256sum -c --quiet --strict SHA256SUMS", "/opt/sealbench/build-linux-0123456789ab",
		"tar -xf " + bundleDisk, " serve --socket ", " mux --port '/dev/virtio-ports/" + GuestPort + "'"} {
		if !strings.Contains(setup, w) {
			t.Errorf("setup.sh lacks %q:\n%s", w, setup)
		}
	}

	// A file changed after the manifest was verified is refused.
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("HELLO\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeBundleDisk(disk, dir, filepath.Base(dir), m); err == nil || !strings.Contains(err.Error(), "README differs from the verified manifest") {
		t.Errorf("a changed file: %v", err)
	}
}

func TestBackendTakesOnlyVMDirectories(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "runs", "r", Name, "vm")
	for _, key := range []string{"/etc", "relative/qemu/vm", filepath.Join(filepath.Dir(dir), "disk"), "/x/lima/vm", dir + "/../vm"} {
		e := manifests.LedgerEntry{Target: Name, Kind: manifests.ResourceVM, Key: key, Exe: "/usr/bin/qemu-system-x86_64"}
		if err := (backend{}).Remove(ctx, "", e); err == nil || errors.Is(err, runs.ErrGeneric) {
			t.Errorf("Remove %s: %v, want a refusal", key, err)
		}
	}
	e := manifests.LedgerEntry{Target: Name, Kind: manifests.ResourceSocket, Key: dir}
	if err := (backend{}).Remove(ctx, "", e); !errors.Is(err, runs.ErrGeneric) {
		t.Errorf("a socket: %v, want the generic code", err)
	}
	// A VM directory: there, then removed; absent, nothing.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "disk.qcow2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	vm := manifests.LedgerEntry{Target: Name, Kind: manifests.ResourceVM, Key: dir, Exe: "/usr/bin/qemu-system-x86_64"}
	if ok, _, err := (backend{}).Exists(ctx, "", vm); !ok || err != nil {
		t.Errorf("Exists: %v %v", ok, err)
	}
	if err := (backend{}).Remove(ctx, "", vm); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := (backend{}).Exists(ctx, "", vm); ok || err != nil {
		t.Errorf("Exists after Remove: %v %v", ok, err)
	}
}
