// Package lima provisions the lima target: a Lima VM (QEMU on Linux
// hosts, under TCG software emulation; vz on macOS hosts) booted from the
// VM image `sealbench image vm` builds, with the bundle copied in and
// checked there, and the Engine API stand-in running inside it as root.
// The runner drives it exactly as it drives the local target: through a
// unix socket on the host, which Lima forwards from the guest.
//
// # Where things live
//
// limactl refuses to run as root, so as root sealbench runs it as uid
// 65534 (Unprivileged), which cannot enter run directories (0700, root's).
// Each run's Lima state therefore lives in Dir()/<run id>:
//
//	state.json   what teardown and the audit need to know (limactl, uid)
//	image/       the VM image's disk, kernel and initrd, copied from the
//	             image cache through a hashing reader and checked against
//	             the image's recorded digests (root's, read-only to Lima)
//	bundle/NAME  the bundle, copied the same way against the verified manifest
//	qemu-tcg     the QEMU wrapper that turns KVM into TCG (qemuWrapper)
//	home/        limactl's HOME (uid 65534's)
//	lima/        LIMA_HOME (uid 65534's); lima/sb is the instance, and
//	lima/sb/sock/engine.sock the Engine endpoint
//
// The run directory's lima/ keeps the instance YAML (lima.yaml) and
// limactl's output (limactl.log).
//
// # Inside the VM
//
// The bundle is copied into the guest with `limactl copy`, installed as
// root at /opt/sealbench/NAME, and checked there twice: its SHA256SUMS must
// be the verified manifest's, byte for byte, and `sha256sum -c` must pass
// with exactly the manifest's files present. The stand-in then runs as the
// systemd unit sealbench-standin. Lima forwards unix sockets over ssh as
// the guest user, and the stand-in accepts connections from its own uid
// (root) only, so the forwarded socket (GuestEngineSocket) is a systemd
// socket unit owned by the guest user that starts, for each connection,
// the bundle's own `standin dial` as root, joined to the stand-in's socket.
// (systemd-socket-proxyd would be simpler, but Debian 12's drops the whole
// connection when the client half-closes, as the Engine API's exec attach
// does after its stdin, and the exec's output was lost.) The guest user
// has passwordless sudo in every Lima VM, so this gives it nothing it did
// not have.
//
// # Teardown and the audit
//
// Lima has no labels: the run's Lima directory is the handle. The ledger
// names it (kind vm), the instance (kind vm, key lima/sb under it), the
// hostagent and QEMU processes, and what the Engine holds; the Backend
// registered for "lima" stops and deletes the instance (limactl stop -f,
// delete -f), kills whatever still has an argument under the directory
// (hostagent, QEMU, ssh), and removes it. Its audit lists every run's Lima
// directory under Dir(), every process with an argument under Dir(), and
// Lima's lima-psl-* socket directories in /tmp owned by the unprivileged
// user.
package lima

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/lima-vm/lima/pkg/limayaml"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/toolcache"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/vmimages"
)

// Name is the target's name.
const Name = "lima"

var _ provision.Target = (*Lima)(nil)

// Guest-side paths of the stand-in.
const (
	guestBundleRoot   = manifests.SandboxBundleDir
	guestStandinSock  = "/run/sealbench-standin/standin.sock"
	guestStandinState = "/var/lib/sealbench/standin"
	standinUnit       = "sealbench-standin"
	engineUnit        = "sealbench-engine"
)

// Options configures the lima target.
type Options struct {
	Run *runs.Run
	// Bundle is a verified bundle directory and Manifest its verified
	// manifest: every file copied into the VM is checked against it.
	Bundle   string
	Manifest *manifests.BundleManifest
	// VMImage is the directory `sealbench image vm` (make vm-image) wrote:
	// vm-image.json with disk.qcow2, vmlinuz and initrd.img beside it.
	VMImage string
	// Size sizes the VM; its ReadyTimeout bounds `limactl start` and the
	// wait for the Engine.
	vmtarget.Size
	// Limactl is limactl's path, with share/lima/lima-guestagent.* at
	// ../share/lima beside it; empty means $SEALBENCH_LIMACTL, then
	// limactl on PATH.
	Limactl string
	Log     func(format string, args ...any)
}

// LimactlEnv names the environment variable that says where limactl is.
const LimactlEnv = "SEALBENCH_LIMACTL"

// Lima is a Lima VM with the stand-in inside.
type Lima struct {
	o        Options
	dir      string // <run>/lima
	yaml     string
	logPath  string
	l        layout
	ctl      *limactl
	vmType   string
	arch     string
	realQEMU string
	emulated bool
	// limactl is the limactl found (FindLimactl), which Create copies into
	// the run's directory each time: t.ctl runs the copy.
	limactl string
}

// FindLimactl returns the limactl to use: path when not empty, else
// $SEALBENCH_LIMACTL, else the one `make lima-tools` builds (in
// internal/toolcache's directory), else limactl on PATH.
func FindLimactl(path string) (string, error) {
	if path == "" {
		path = os.Getenv(LimactlEnv)
	}
	if path == "" {
		if p := toolcache.Limactl(); fileExists(p) {
			path = p
		}
	}
	if path == "" {
		p, err := exec.LookPath("limactl")
		if err != nil {
			return "", fmt.Errorf("limactl %s not found (nor on PATH, nor in %s): run `make lima-tools` in the sealbench source tree", toolcache.LimaVersion, LimactlEnv)
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("limactl %s: %w (build it with `make lima-tools`)", abs, err)
	}
	return abs, nil
}

// New returns the lima target of o.Run. It creates nothing.
func New(o Options) (*Lima, error) {
	if o.Run == nil {
		return nil, errors.New("lima target: no run")
	}
	if o.Manifest == nil || o.Bundle == "" {
		return nil, errors.New("lima target: no verified bundle and manifest")
	}
	if o.VMImage == "" {
		return nil, errors.New("lima target: no VM image directory (build one with `make vm-image`)")
	}
	o.Size.FillDefaults()
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	exe, err := FindLimactl(o.Limactl)
	if err != nil {
		return nil, err
	}
	arch, err := LimaArch(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Run.Dir, Name)
	t := &Lima{o: o, dir: dir, yaml: filepath.Join(dir, "lima.yaml"), logPath: filepath.Join(dir, "limactl.log"),
		l: newLayout(filepath.Join(Dir(), o.Run.ID)), arch: arch, vmType: limayaml.QEMU}
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		uid, gid = Unprivileged, Unprivileged
	}
	t.ctl = &limactl{exe: exe, uid: uid, gid: gid, l: t.l, log: io.Discard}
	t.limactl = exe
	switch runtime.GOOS {
	case "darwin":
		t.vmType = limayaml.VZ
	case "linux":
		q, err := exec.LookPath("qemu-system-" + arch)
		if err != nil {
			return nil, fmt.Errorf("the lima target needs QEMU (Debian package qemu-system-x86): %w", err)
		}
		t.realQEMU, t.emulated = q, true
	default:
		return nil, fmt.Errorf("the lima target does not run on %s", runtime.GOOS)
	}
	if n := len(t.l.socket); n > 100 {
		return nil, fmt.Errorf("the Engine socket path %s is %d bytes, too long for a unix socket: Lima's directory %s must be shorter", t.l.socket, n, Dir())
	}
	return t, nil
}

func (t *Lima) Name() string     { return Name }
func (t *Lima) Endpoint() string { return "unix://" + t.l.socket }

// Emulated reports whether the VM's CPU is emulated (QEMU under TCG): on
// Linux hosts it always is, and Create checks QEMU's command line says so.
func (t *Lima) Emulated() bool { return t.emulated }

// LimaDir is the run's Lima directory (see the package doc).
func (t *Lima) LimaDir() string { return t.l.root }

func (t *Lima) record(e manifests.LedgerEntry) error {
	e.Target = Name
	return t.o.Run.Ledger.Record(e)
}

// answers reports whether the Engine in the VM answers a ping.
func (t *Lima) answers(ctx context.Context) bool {
	return exists(t.l.socket) && engine.Ping(ctx, t.Endpoint(), 10*time.Second) == nil
}

// Create boots the VM and starts the stand-in in it; when the Engine
// already answers, it does nothing.
func (t *Lima) Create(ctx context.Context) error {
	if t.answers(ctx) {
		return nil
	}
	start := time.Now()
	if err := t.record(manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: t.dir, Detail: "the lima target's directory: the instance YAML, limactl's output"}); err != nil {
		return err
	}
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", t.dir, err)
	}
	logf, err := os.OpenFile(t.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening limactl's log: %w", err)
	}
	defer logf.Close()
	t.ctl.log = logf
	defer func() { t.ctl.log = io.Discard }()

	img, err := vmimages.LoadVerifiedVM(t.o.VMImage, t.o.Log)
	if err != nil {
		return err
	}

	if err := t.record(manifests.LedgerEntry{Kind: manifests.ResourceVM, Key: t.l.root, Exe: t.ctl.exe,
		Detail: "the run's Lima directory: LIMA_HOME, limactl's HOME, the verified VM image and bundle copies"}); err != nil {
		return err
	}
	if err := t.prepareDir(img); err != nil {
		return err
	}
	// The processes `limactl start` leaves running, as they can be matched
	// (the pid file each is given is unique to the run), then the VM.
	if err := t.record(manifests.LedgerEntry{Kind: manifests.ResourceProcess, Key: filepath.Join(t.l.instDir, "ha.pid"), Exe: t.ctl.exe,
		Detail: "Lima's hostagent"}); err != nil {
		return err
	}
	if t.realQEMU != "" {
		if err := t.record(manifests.LedgerEntry{Kind: manifests.ResourceProcess, Key: filepath.Join(t.l.instDir, "qemu.pid"), Exe: t.realQEMU,
			Detail: "QEMU (TCG)"}); err != nil {
			return err
		}
	}
	if err := t.record(manifests.LedgerEntry{Kind: manifests.ResourceVM, Key: t.l.instDir, Exe: t.ctl.exe,
		Detail: fmt.Sprintf("Lima instance %s (%s, %d vCPU, %d MiB)", Instance, t.vmType, t.o.CPUs, t.o.MemoryBytes>>20)}); err != nil {
		return err
	}
	y, err := t.instanceYAML(img)
	if err != nil {
		return err
	}
	if err := os.WriteFile(t.yaml, y, 0o600); err != nil {
		return err
	}
	if exists(t.l.instDir) {
		// Left by an earlier Create that failed half-way: start afresh.
		t.o.Log("removing the half-made instance %s", t.l.instDir)
		if err := removeInstance(ctx, t.ctl); err != nil {
			return err
		}
	}
	if _, err := t.ctl.run(ctx, bytes.NewReader(y), "create", "--tty=false", "--name="+Instance, "-"); err != nil {
		return fmt.Errorf("creating the Lima instance from %s: %w", t.yaml, err)
	}
	t.o.Log("starting the VM (%s; about a minute under TCG); limactl's output goes to %s", t.vmType, t.logPath)
	sctx, cancel := context.WithTimeout(ctx, t.o.ReadyTimeout)
	defer cancel()
	if err := t.ctl.runLogged(sctx, logf, "start", "--tty=false", "--timeout="+t.o.ReadyTimeout.String(), Instance); err != nil {
		// Lima gives its guest agent a minute to come up after the probes
		// pass, which a loaded host under TCG can miss; it then calls the
		// VM degraded and start fails. The agent only serves TCP port
		// forwards and file-sharing events, neither of which is used
		// here: the Engine socket goes over ssh, and the Engine answering
		// through it (waitEngine) is the readiness that counts.
		st, serr := t.ctl.status(ctx)
		if serr != nil || st != "Running" || !strings.Contains(tailFile(t.logPath, 5), "guest agent does not seem to be running") {
			return fmt.Errorf("starting the VM: %w; the serial console is in %s", err, filepath.Join(t.l.instDir, "serial.log"))
		}
		t.o.Log("Lima calls the VM degraded: its guest agent is not up yet; going on, since only ssh and its socket forward are used")
	}
	t.o.Log("the VM is up after %s", time.Since(start).Round(time.Second))
	if err := t.checkEmulation(); err != nil {
		return err
	}
	if err := t.installBundle(ctx); err != nil {
		return err
	}
	if err := t.waitEngine(ctx); err != nil {
		return err
	}
	t.o.Log("the stand-in in the VM answers on %s (%s after start)", t.Endpoint(), time.Since(start).Round(time.Second))
	return nil
}

// prepareDir makes the run's Lima directory: state.json, the QEMU wrapper,
// the verified copies of the VM image and the bundle, and the
// unprivileged user's HOME and LIMA_HOME.
func (t *Lima) prepareDir(img *vmimages.VMImage) error {
	if err := secureDir(filepath.Dir(t.l.root), 0o711); err != nil {
		return err
	}
	for _, d := range []string{t.l.root, t.l.image, t.l.bundle} {
		if err := secureDir(d, 0o711); err != nil {
			return err
		}
	}
	if err := t.installLimactl(); err != nil {
		return err
	}
	st, err := json.Marshal(state{Limactl: t.ctl.exe, UID: t.ctl.uid, GID: t.ctl.gid, QEMU: t.realQEMU})
	if err != nil {
		return err
	}
	if err := os.WriteFile(t.l.info, append(st, '\n'), 0o644); err != nil {
		return err
	}
	if t.realQEMU != "" {
		if err := os.WriteFile(t.l.wrapper, qemuWrapper(t.realQEMU), 0o755); err != nil {
			return err
		}
		if err := os.Chmod(t.l.wrapper, 0o755); err != nil {
			return err
		}
	}
	for _, name := range []string{vmimages.VMDisk, vmimages.VMKernel, vmimages.VMInitrd} {
		src, dst := img.Path(name), filepath.Join(t.l.image, name)
		fi, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("VM image: %w", err)
		}
		if err := copyVerified(src, dst, fi.Size(), img.Files[name], 0o644); err != nil {
			return fmt.Errorf("VM image %s changed since it was checked: %w", name, err)
		}
	}
	if err := t.copyBundle(); err != nil {
		return err
	}
	if err := ownedDir(t.l.home, t.ctl.uid, t.ctl.gid); err != nil {
		return err
	}
	return ownedDir(t.l.limaHome, t.ctl.uid, t.ctl.gid)
}

// installLimactl copies limactl and its guest agents, in Lima's install
// layout (bin/limactl beside share/lima/lima-guestagent.*, which limactl
// finds by that relative path), into the run's Lima directory, and runs
// limactl from there: the unprivileged user limactl runs as cannot reach
// where make builds it (under root's 0700 home).
func (t *Lima) installLimactl() error {
	prefix := filepath.Dir(filepath.Dir(t.limactl))
	agents, _ := filepath.Glob(filepath.Join(prefix, "share", "lima", "lima-guestagent.*"))
	if len(agents) == 0 {
		return fmt.Errorf("no lima-guestagent beside %s (in %s): rebuild with `make lima-tools`", t.limactl, filepath.Join(prefix, "share", "lima"))
	}
	exe := filepath.Join(t.l.install, "bin", "limactl")
	for _, d := range []string{filepath.Dir(exe), filepath.Join(t.l.install, "share", "lima")} {
		if err := secureDir(d, 0o755); err != nil {
			return err
		}
	}
	for _, src := range append([]string{t.limactl}, agents...) {
		dst := exe
		if src != t.limactl {
			dst = filepath.Join(t.l.install, "share", "lima", filepath.Base(src))
		}
		if err := copyExecutable(src, dst); err != nil {
			return fmt.Errorf("installing limactl for the unprivileged user: %w", err)
		}
	}
	t.ctl.exe = exe
	return nil
}

// bundleName is the bundle's directory name, build-linux-<hash>.
func (t *Lima) bundleName() string { return filepath.Base(filepath.Clean(t.o.Bundle)) }

// copyBundle copies every file the verified manifest lists, through a
// reader that checks its size and digest, into the run's Lima directory
// (limactl copy reads it from there as the unprivileged user), with
// SHA256SUMS and manifest.json written from the manifest itself.
func (t *Lima) copyBundle() error {
	dst := filepath.Join(t.l.bundle, t.bundleName())
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	for _, d := range append([]string{"."}, t.o.Manifest.Dirs()...) {
		if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	for _, f := range t.o.Manifest.Files {
		src := filepath.Join(t.o.Bundle, filepath.FromSlash(f.Path))
		if err := copyVerified(src, filepath.Join(dst, filepath.FromSlash(f.Path)), f.Size, f.Digest, os.FileMode(f.Mode)); err != nil {
			return fmt.Errorf("the bundle's %s differs from the verified manifest (it changed after it was verified; verify it again): %w", f.Path, err)
		}
	}
	mb, err := t.o.Manifest.Marshal()
	if err != nil {
		return err
	}
	sig, err := os.ReadFile(filepath.Join(t.o.Bundle, manifests.SignatureFile))
	if err != nil {
		return fmt.Errorf("reading the bundle's signature: %w", err)
	}
	for name, b := range map[string][]byte{manifests.ManifestFile: mb, manifests.SignatureFile: sig, manifests.SumsFile: t.o.Manifest.SHA256SUMS()} {
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// instanceYAML generates, validates and returns the instance's YAML.
func (t *Lima) instanceYAML(img *vmimages.VMImage) ([]byte, error) {
	f := func(name string) File { return File{Path: filepath.Join(t.l.image, name), Digest: img.Files[name]} }
	c := &InstanceConfig{VMType: t.vmType, Arch: t.arch, CPUs: t.o.CPUs, MemoryBytes: t.o.MemoryBytes, DiskBytes: t.o.DiskBytes,
		Disk: f(vmimages.VMDisk), Kernel: f(vmimages.VMKernel), Initrd: f(vmimages.VMInitrd), KernelCmdline: img.Cmdline, HostSocket: t.l.socket}
	y, err := InstanceYAML(c)
	if err != nil {
		return nil, err
	}
	if err := ValidateYAML(y, t.l.instDir); err != nil {
		return nil, err
	}
	return y, nil
}

// checkEmulation finds the instance's QEMU and checks, from its command
// line, that it runs under TCG and not KVM.
func (t *Lima) checkEmulation() error {
	if t.realQEMU == "" {
		return nil
	}
	ps := runs.FindProcs(runs.MarkedBy(t.realQEMU, filepath.Join(t.l.instDir, "qemu.pid")))
	if len(ps) != 1 {
		return fmt.Errorf("found %d QEMU processes for %s, want 1", len(ps), t.l.instDir)
	}
	args := strings.Join(ps[0].Argv, " ")
	if strings.Contains(args, "kvm") {
		return fmt.Errorf("QEMU (pid %d) runs with KVM, which must never be used here: %s", ps[0].Pid, args)
	}
	if !strings.Contains(args, "accel=tcg") && !strings.Contains(args, "-accel tcg") {
		return fmt.Errorf("QEMU (pid %d) does not say it runs under TCG: %s", ps[0].Pid, args)
	}
	return nil
}

// guestBundleDir is where the bundle lives inside the VM.
func (t *Lima) guestBundleDir() string { return path.Join(guestBundleRoot, t.bundleName()) }

// installBundle copies the bundle into the VM, installs it as root,
// checks it against the verified manifest there, and starts the stand-in
// and the socket the guest user reaches it through.
func (t *Lima) installBundle(ctx context.Context) error {
	src := filepath.Join(t.l.bundle, t.bundleName())
	staging := path.Join(GuestHome, "sealbench-copy")
	if _, err := t.ctl.run(ctx, nil, "shell", "--workdir=/", Instance, "rm", "-rf", staging); err != nil {
		return err
	}
	if _, err := t.ctl.run(ctx, nil, "copy", "-r", src, Instance+":"+staging); err != nil {
		return fmt.Errorf("copying the bundle into the VM: %w", err)
	}
	t.o.Log("copied the bundle into the VM; checking it there and starting the stand-in")
	out, err := t.ctl.run(ctx, strings.NewReader(t.guestScript(staging)), "shell", "--workdir=/", Instance, "sudo", "/bin/sh", "-s")
	if err != nil {
		return fmt.Errorf("installing the bundle in the VM: %w\n%s", err, out)
	}
	fmt.Fprintf(t.ctl.log, "%s", out)
	return nil
}

// guestScript is what runs as root in the VM once the bundle is copied to
// staging: install it, check it, start the stand-in and the socket.
func (t *Lima) guestScript(staging string) string {
	dir := t.guestBundleDir()
	standin := path.Join(dir, "bin", "linux-"+runtime.GOARCH, "standin")
	return `systemctl stop ` + engineUnit + `.socket ` + engineUnit + `.service ` + standinUnit + `.service 2>/dev/null || true
systemctl reset-failed ` + engineUnit + `.socket ` + engineUnit + `.service ` + standinUnit + `.service 2>/dev/null || true
` + vmtarget.InstallBundleScript(t.o.Manifest, dir, `cp -R `+vmtarget.ShellQuote(staging)+` "$dir.new"
rm -rf `+vmtarget.ShellQuote(staging)) + `
mkdir -p ` + vmtarget.ShellQuote(guestStandinState) + `
systemd-run --quiet --unit=` + standinUnit + ` --description='sealbench Engine API stand-in' \
	--property=KillMode=mixed --property=TimeoutStopSec=30 \
	` + vmtarget.ShellQuote(standin) + ` serve --socket ` + vmtarget.ShellQuote(guestStandinSock) + ` --state ` + vmtarget.ShellQuote(guestStandinState) + `
cat > /run/systemd/system/` + engineUnit + `.socket <<'UNIT'
[Unit]
Description=sealbench Engine socket for ` + GuestUser + `
[Socket]
ListenStream=` + GuestEngineSocket + `
SocketUser=` + GuestUser + `
SocketGroup=` + GuestUser + `
SocketMode=0600
DirectoryMode=0755
Accept=yes
UNIT
cat > /run/systemd/system/` + engineUnit + `@.service <<'UNIT'
[Unit]
Description=sealbench Engine connection, joined to the stand-in by standin dial
[Service]
ExecStart=` + standin + ` dial --socket ` + guestStandinSock + `
StandardInput=socket
StandardOutput=socket
StandardError=journal
UNIT
systemctl daemon-reload
systemctl start ` + engineUnit + `.socket
echo started
`
}

// waitEngine waits until the stand-in answers through the forwarded socket.
func (t *Lima) waitEngine(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if t.answers(ctx) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			out, _ := t.ctl.run(ctx, nil, "shell", "--workdir=/", Instance, "sudo", "journalctl", "--no-pager", "-n", "40",
				"-u", standinUnit, "-u", engineUnit+".socket", "-u", engineUnit+"@*")
			return fmt.Errorf("the stand-in in the VM does not answer on %s: its journal:\n%s", t.Endpoint(), out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// InstallImage loads img into the stand-in in the VM, through the Engine API.
func (t *Lima) InstallImage(ctx context.Context, img engine.Image) error {
	cli, err := engine.NewClient(t.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	return engine.LoadImage(ctx, cli, t.o.Run.Ledger, Name, t.Endpoint(), img)
}

// Identity asks the stand-in in the VM: the guest's kernel, vCPUs and
// memory; the guest's CPU is emulated.
func (t *Lima) Identity(ctx context.Context) (*engine.Identity, error) {
	id, err := engine.Identify(ctx, Name, t.Endpoint())
	if err != nil {
		return nil, err
	}
	id.Emulated = t.emulated
	return id, nil
}

// Destroy tears down every ledger entry of the lima target: the Engine's
// containers and images, the VM, its processes, the run's Lima directory.
func (t *Lima) Destroy(ctx context.Context) error {
	_, err := runs.Teardown(ctx, t.o.Run.Dir, runs.TeardownOptions{Targets: []string{Name}, Log: t.o.Log})
	return err
}

// Inventory lists what of the run the lima target holds.
func (t *Lima) Inventory(ctx context.Context) ([]runs.Resource, error) {
	return t.o.Run.Held(ctx, Name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
