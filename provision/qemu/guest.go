package qemu

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
)

// Inside the VM. The guest has no network and no cloud-init (it is
// disabled on the kernel command line): systemd's systemd.run= runs one
// command at boot, which reads setup.sh from the bundle disk and runs it
// as root. setup.sh installs the bundle from the same disk and checks it
// exactly as the lima target does (vmtarget.InstallBundleScript), then
// starts the stand-in and its end of the link as systemd units. A failure
// powers the VM off (QEMU exits, and Create reports the console's tail).
const (
	guestStandinSock  = "/run/sealbench-standin/standin.sock"
	guestStandinState = "/var/lib/sealbench/standin"
	standinUnit       = "sealbench-standin"
	muxUnit           = "sealbench-mux"
	setupMember       = "setup.sh"
	bundleMember      = "bundle" // the bundle's files are under bundle/ in the tar
)

// bundleDisk is the bundle disk's device inside the VM.
const bundleDisk = "/dev/disk/by-id/virtio-" + bundleSerial

// kernelCmdline is the image's command line with what brings the guest
// up: cloud-init off, setup.sh run from the bundle disk, the VM powered
// off when it fails, and the journal on the console (the run directory's
// console.log). tscKHz, when not zero, is the TSC's frequency for the
// guest to take instead of measuring it (see hostTSCkHz).
func kernelCmdline(image string, tscKHz int64) string {
	if tscKHz > 0 {
		image += " tsc_early_khz=" + strconv.FormatInt(tscKHz, 10)
	}
	return image + ` cloud-init=disabled systemd.journald.forward_to_console=1` +
		` systemd.run="/bin/sh -c 'tar -xOf ` + bundleDisk + ` ` + setupMember + ` > /run/sealbench-setup.sh && exec /bin/sh /run/sealbench-setup.sh'"` +
		` systemd.run_success_action=none systemd.run_failure_action=poweroff`
}

// hostTSCkHz is this host's TSC frequency in kHz as /proc/cpuinfo says
// it, or 0. Under TCG the guest's TSC is the host's, and the guest kernel
// measures its frequency against the emulated PIT, which fails when the
// host is busy ("Unable to calibrate against PIT"); the kernel then hangs
// calibrating its delay loop. Given the frequency (tsc_early_khz), it
// measures nothing.
func hostTSCkHz() int64 {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !strings.Contains(string(b), " constant_tsc") {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || mhz <= 0 {
				return 0
			}
			return int64(mhz * 1000)
		}
	}
	return 0
}

// guestBundleDir is where the bundle is installed in the VM.
func guestBundleDir(name string) string { return path.Join(manifests.SandboxBundleDir, name) }

// setupScript is setup.sh for the bundle name with verified manifest m.
func setupScript(m *manifests.BundleManifest, name string) string {
	dir := guestBundleDir(name)
	standin := path.Join(dir, "bin", "linux-"+runtime.GOARCH, "standin")
	port := "/dev/virtio-ports/" + GuestPort
	q := vmtarget.ShellQuote
	return `modprobe -a virtio_console fuse || true
udevadm settle || true
resize2fs /dev/vda >/dev/null 2>&1 || true
` + vmtarget.InstallBundleScript(m, dir, `mkdir "$dir.new"
tar -xf `+bundleDisk+` -C "$dir.new" --strip-components=1 `+bundleMember) + `
mkdir -p ` + q(guestStandinState) + `
systemd-run --quiet --unit=` + standinUnit + ` --description='sealbench Engine API stand-in' \
	--property=KillMode=mixed --property=TimeoutStopSec=30 \
	` + q(standin) + ` serve --socket ` + q(guestStandinSock) + ` --state ` + q(guestStandinState) + `
i=0
while [ ! -e ` + q(port) + ` ]; do
	i=$((i+1)); [ $i -le 600 ] || { echo "no ` + port + `" >&2; exit 1; }
	sleep 0.1
done
systemd-run --quiet --unit=` + muxUnit + ` --description='sealbench Engine link over the serial port' \
	--property=Restart=always ` + q(standin) + ` mux --port ` + q(port) + ` --socket ` + q(guestStandinSock) + `
echo "sealbench: the stand-in and its link are up"
`
}

// writeBundleDisk writes the bundle disk: a tar of setup.sh, then every
// file of the verified manifest under bundle/, each read through a reader
// that fails unless it is the manifest's size and digest (what the guest
// gets is what was verified, not what the directory holds by then), with
// manifest.json and SHA256SUMS written from the manifest itself and the
// signature beside them.
func writeBundleDisk(dst, bundleDir, name string, m *manifests.BundleManifest) (err error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	put := func(name string, b []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(b)), Mode: mode, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := put(setupMember, []byte(setupScript(m, name)), 0o644); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: bundleMember + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
		return err
	}
	for _, d := range m.Dirs() {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path.Join(bundleMember, d) + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, mf := range m.Files {
		if err := addVerified(tw, filepath.Join(bundleDir, filepath.FromSlash(mf.Path)), path.Join(bundleMember, mf.Path), mf); err != nil {
			return fmt.Errorf("the bundle's %s differs from the verified manifest (it changed after it was verified; verify it again): %w", mf.Path, err)
		}
	}
	mb, err := m.Marshal()
	if err != nil {
		return err
	}
	sig, err := os.ReadFile(filepath.Join(bundleDir, manifests.SignatureFile))
	if err != nil {
		return fmt.Errorf("reading the bundle's signature: %w", err)
	}
	for _, e := range []struct {
		name string
		b    []byte
	}{{manifests.ManifestFile, mb}, {manifests.SignatureFile, sig}, {manifests.SumsFile, m.SHA256SUMS()}} {
		if err := put(path.Join(bundleMember, e.name), e.b, 0o644); err != nil {
			return err
		}
	}
	return tw.Close()
}

// addVerified adds the file at src to tw as name, through a reader that
// checks it against mf.
func addVerified(tw *tar.Writer, src, name string, mf manifests.BundleFile) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: mf.Size, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, manifests.NewVerifyingReader(in, mf.Size, mf.Digest))
	return err
}
