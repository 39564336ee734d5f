package vmimages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
)

// VMSpec returns what the VM disk holds, for a Debian architecture: what
// Lima needs to boot and reach READY under cloud-init (see LIMA-NOTES in
// the design folder: systemd, udev, dbus, the network tools Lima's config
// uses, ssh, sudo, cloud-init, the cloud kernel and its initramfs), plus
// what the cells and LayerFS need (coreutils, git, fuse3). Debian's
// essential and required packages are added when the lock is resolved.
func VMSpec(arch string) manifests.PackageSpec {
	roots := []string{
		"ca-certificates", "cloud-guest-utils", "cloud-init", "coreutils", "dbus", "fuse3", "git",
		"ifupdown", "initramfs-tools", "iproute2", "iptables", "isc-dhcp-client", "kmod",
		"libpam-systemd", "linux-image-cloud-" + arch, "netbase", "openssh-server", "procps",
		"sshfs", "sudo", "systemd-sysv", "tzdata", "udev",
	}
	sort.Strings(roots)
	return manifests.PackageSpec{Roots: roots, Exclude: []string{}}
}

// essentials lists the packages Debian marks Essential or Priority required:
// every Debian system has them, so a VM lock includes them.
func (a *apt) essentials(ctx context.Context) ([]string, error) {
	out, err := a.run(ctx, a.root, "apt-cache", "dumpavail")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, st := range parseStanzas(out) {
		if st["Essential"] == "yes" || st["Priority"] == "required" {
			set[st["Package"]] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// LockVM resolves the VM disk's packages: VMSpec plus Debian's essential
// and required set, with their dependencies.
func LockVM(ctx context.Context, cacheDir, arch string, now time.Time, logf func(string, ...any)) (*manifests.PackageLock, error) {
	a, err := newApt(cacheDir, arch)
	if err != nil {
		return nil, err
	}
	logf("updating the %s package lists", arch)
	if err := a.update(ctx); err != nil {
		return nil, err
	}
	ess, err := a.essentials(ctx)
	if err != nil {
		return nil, err
	}
	spec := VMSpec(arch)
	// Resolve essentials as roots too, but record the spec as written.
	full := spec
	full.Roots = append(append([]string{}, spec.Roots...), ess...)
	pkgs, err := a.resolve(ctx, full)
	if err != nil {
		return nil, err
	}
	l := &manifests.PackageLock{
		SchemaVersion: manifests.PackageLockSchemaVersion, Kind: manifests.PackageLockKind,
		Name: "vm", Arch: arch, Spec: spec, Time: now.UTC().Truncate(time.Second), Packages: pkgs,
	}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("resolved an invalid lock (a bug): %w", err)
	}
	logf("resolved %d packages for the %s VM disk", len(pkgs), arch)
	return l, nil
}

// VM image file names, in the output directory; each has a .sha256 beside it.
const (
	VMDisk   = "disk.qcow2"
	VMKernel = "vmlinuz"
	VMInitrd = "initrd.img"
	VMInfo   = "vm-image.json"
	VMLock   = "lock.json" // the package lock it was built from, byte for byte
)

// VMImage identifies a built VM disk, its kernel and its initrd by digest.
type VMImage struct {
	Arch       string                      `json:"arch"`
	LockDigest manifests.Digest            `json:"lockDigest"`
	Dir        string                      `json:"dir"`
	Files      map[string]manifests.Digest `json:"files"` // disk.qcow2, vmlinuz, initrd.img
	Cmdline    string                      `json:"cmdline"`
	// Relock says why the image was built from a fresh lock (kept beside
	// it as lock.json, like every VM image's lock), if it was.
	Relock  *Relock       `json:"relock,omitempty"`
	Elapsed time.Duration `json:"elapsedNanos"`
}

// Path returns the path of one of the image's files.
func (v *VMImage) Path(name string) string { return filepath.Join(v.Dir, name) }

// Verify re-hashes every file against the digests recorded when it was
// built: Lima does not re-hash a file that is already present, so we do.
func (v *VMImage) Verify() error {
	for name, want := range v.Files {
		_, got, err := hashPath(v.Path(name))
		if err != nil {
			return fmt.Errorf("VM image %s: %w", name, err)
		}
		if got != want {
			return fmt.Errorf("VM image %s: SHA-256 %s, recorded %s: the file changed since it was built", name, got, want)
		}
	}
	return nil
}

// KernelCmdline boots the ext4 filesystem written straight onto the disk.
const KernelCmdline = "root=/dev/vda rw console=ttyS0 net.ifnames=0"

// VMOptions says what to build.
type VMOptions struct {
	Lock      *manifests.PackageLock
	LockBytes []byte
	CacheDir  string
	// Sources and Relock: see FetchOptions.
	Sources []string
	Relock  bool
	// DiskSize is the disk's virtual size, e.g. "4G".
	DiskSize string
	Log      func(string, ...any)
}

// BuildVM builds (or finds in the cache, keyed by the lock's digest) a
// bootable Debian disk with its kernel and initrd as separate files. The
// packages come from a local repository of exactly the locked, verified
// .debs, so mmdebstrap can install nothing else.
func BuildVM(ctx context.Context, o VMOptions) (*VMImage, error) {
	start := time.Now()
	fetch := FetchOptions{CacheDir: o.CacheDir, Sources: o.Sources, Relock: o.Relock, Log: o.Log}
	fetch.fillDefaults()
	logf := fetch.Log
	if o.DiskSize == "" {
		o.DiskSize = "4G"
	}
	for _, tool := range []string{"mmdebstrap", "mkfs.ext4", "qemu-img", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("building a VM image needs %s (Debian packages mmdebstrap, e2fsprogs, qemu-utils, dpkg): %w", tool, err)
		}
	}
	if img := cachedVM(VMDir(fetch.CacheDir, o.Lock, o.LockBytes), logf); img != nil {
		return img, nil
	}
	pk, err := getPackages(ctx, o.Lock, o.LockBytes, fetch)
	if err != nil {
		return nil, err
	}
	if pk.relock != nil {
		logf("%s", pk.relock.Notice("VM image"))
		o.Lock, o.LockBytes = pk.lock, pk.bytes
		if img := cachedVM(VMDir(fetch.CacheDir, o.Lock, o.LockBytes), logf); img != nil {
			img.Relock = pk.relock
			return img, nil
		}
	}
	debs := pk.debs
	lockDigest := manifests.DigestOf(o.LockBytes)
	dir := VMDir(fetch.CacheDir, o.Lock, o.LockBytes)
	// A build killed part-way leaves its staging directory: the next
	// build removes it (scratch), never a live build's.
	scratch.Sweep(fetch.CacheDir) // what it cannot remove is no reason to stop
	sd, err := scratch.Make(fetch.CacheDir, "vm-build")
	if err != nil {
		return nil, err
	}
	defer sd.Remove()
	work := sd.Path

	repo := filepath.Join(work, "repo")
	if err := localRepo(ctx, repo, o.Lock, debs); err != nil {
		return nil, err
	}
	rootfs := filepath.Join(work, "rootfs")
	var names []string
	for _, p := range o.Lock.Packages {
		names = append(names, p.Name)
	}
	logf("installing %d packages with mmdebstrap (a minute or two)", len(names))
	cfg := "datasource_list: [ NoCloud, None ]\nlocale: C.UTF-8\n"
	args := []string{
		"--variant=custom", "--mode=root", "--format=directory",
		"--architectures=" + o.Lock.Arch,
		"--include=" + strings.Join(names, ","),
		"--aptopt=Acquire::Languages \"none\"",
		"--customize-hook=mkdir -p \"$1/etc/cloud/cloud.cfg.d\" && printf '" + cfg + "' > \"$1/etc/cloud/cloud.cfg.d/90-sealbench.cfg\"",
		"--customize-hook=echo sealbench > \"$1/etc/hostname\"",
		"--customize-hook=printf '/dev/vda / ext4 defaults 0 1\\n' > \"$1/etc/fstab\"",
		"bookworm", rootfs, "deb [trusted=yes] copy://" + repo + " ./",
	}
	cmd := toolexec.Command(ctx, "mmdebstrap", args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", o.Lock.Time.Unix()), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mmdebstrap: %v\n%s", err, tail(out, 40))
	}
	if err := checkInstalled(rootfs, o.Lock); err != nil {
		return nil, err
	}

	stage := filepath.Join(work, "out")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, err
	}
	for src, dst := range map[string]string{"vmlinuz-*": VMKernel, "initrd.img-*": VMInitrd} {
		m, _ := filepath.Glob(filepath.Join(rootfs, "boot", src))
		if len(m) != 1 {
			return nil, fmt.Errorf("the VM root filesystem has %d files matching boot/%s, want 1", len(m), src)
		}
		b, err := os.ReadFile(m[0])
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(stage, dst), b, 0o644); err != nil {
			return nil, err
		}
	}
	logf("writing the ext4 filesystem and converting it to qcow2")
	raw := filepath.Join(work, "disk.raw")
	mkfs := toolexec.Command(ctx, "mkfs.ext4", "-q", "-F", "-L", "sealbench-root",
		"-U", "5ea1be9c-0000-4000-8000-000000000001", "-E", "root_owner=0:0", "-d", rootfs, raw, o.DiskSize)
	mkfs.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", o.Lock.Time.Unix()))
	if out, err := mkfs.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkfs.ext4: %v\n%s", err, tail(out, 20))
	}
	if out, err := toolexec.Command(ctx, "qemu-img", "convert", "-O", "qcow2", raw, filepath.Join(stage, VMDisk)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img convert: %v\n%s", err, tail(out, 20))
	}

	if err := os.WriteFile(filepath.Join(stage, VMLock), o.LockBytes, 0o644); err != nil {
		return nil, err
	}
	img := &VMImage{Arch: o.Lock.Arch, LockDigest: lockDigest, Dir: dir, Files: map[string]manifests.Digest{}, Cmdline: KernelCmdline, Relock: pk.relock}
	for _, name := range []string{VMDisk, VMKernel, VMInitrd} {
		_, d, err := hashPath(filepath.Join(stage, name))
		if err != nil {
			return nil, err
		}
		img.Files[name] = d
		if err := os.WriteFile(filepath.Join(stage, name+".sha256"), []byte(d.Hex+"  "+name+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	img.Elapsed = time.Since(start)
	b, _ := json.MarshalIndent(img, "", "  ")
	if err := os.WriteFile(filepath.Join(stage, VMInfo), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	// Only a complete image enters the cache.
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(stage, dir); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	logf("VM image in %s (%.0fs)", dir, img.Elapsed.Seconds())
	return img, nil
}

// cachedVM returns the VM image cached in dir when its files still match
// their digests.
func cachedVM(dir string, logf func(string, ...any)) *VMImage {
	img, err := LoadVM(dir)
	if err != nil {
		return nil
	}
	if err := img.Verify(); err != nil {
		logf("cached VM image in %s no longer matches its digests: rebuilding", dir)
		return nil
	}
	logf("VM image for lock %s is cached in %s", img.LockDigest.Short(12), dir)
	return img
}

// FindVM returns the directory of the VM image `make vm-image` builds for
// arch with the lock built into this sealbench: the committed lock's image
// when it was built, else the image of the fresh lock that stood in for it
// when the committed lock's packages could not be had.
func FindVM(cacheDir, arch string) (string, error) {
	lock, lb, err := DefaultLock("vm", arch)
	if err != nil {
		return "", err
	}
	dir := VMDir(cacheDir, lock, lb)
	if _, err := os.Stat(filepath.Join(dir, VMInfo)); err == nil {
		return dir, nil
	}
	if fresh, fb, err := reuseFreshLock(FreshLockPath(cacheDir, lock, lb), lock); err == nil {
		if fdir := VMDir(cacheDir, fresh, fb); fileExists(filepath.Join(fdir, VMInfo)) {
			return fdir, nil
		}
	}
	return dir, nil
}

// DefaultVM is the directory `make vm-image` writes for this sealbench's
// VM lock and this host's arch, in the image cache (FindVM): where the
// targets that boot the VM image (lima, qemu) find it.
func DefaultVM() (string, error) {
	return FindVM(DefaultCacheDir(), runtime.GOARCH)
}

// LoadVerifiedVM loads the VM image in dir (LoadVM) and re-hashes every
// file against its recorded digests (Verify), saying so through logf: what
// a target does before it boots the image.
func LoadVerifiedVM(dir string, logf func(string, ...any)) (*VMImage, error) {
	img, err := LoadVM(dir)
	if err != nil {
		return nil, err
	}
	logf("checking the VM image in %s against its recorded digests", img.Dir)
	if err := img.Verify(); err != nil {
		return nil, fmt.Errorf("%w: rebuild it with `make vm-image`", err)
	}
	return img, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// VMDir is where BuildVM keeps the VM image of lock (whose bytes are
// lockBytes) under cacheDir: vm/<arch>-<16 hex of the lock's digest>.
func VMDir(cacheDir string, lock *manifests.PackageLock, lockBytes []byte) string {
	return filepath.Join(cacheDir, "vm", lock.Arch+"-"+manifests.DigestOf(lockBytes).Short(16))
}

// LoadVM reads the vm-image.json that BuildVM wrote in dir, checking that
// it records a digest for the disk, the kernel and the initrd. It does not
// hash the files: Verify does.
func LoadVM(dir string) (*VMImage, error) {
	b, err := os.ReadFile(filepath.Join(dir, VMInfo))
	if err != nil {
		return nil, fmt.Errorf("reading the VM image in %s: %w (build it with `make vm-image`)", dir, err)
	}
	var img VMImage
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, VMInfo), err)
	}
	img.Dir = dir
	for _, name := range []string{VMDisk, VMKernel, VMInitrd} {
		if err := img.Files[name].Validate(); err != nil {
			return nil, fmt.Errorf("the VM image in %s records no valid digest for %s: %w", dir, name, err)
		}
	}
	if img.Cmdline == "" {
		img.Cmdline = KernelCmdline
	}
	return &img, nil
}

// localRepo writes a flat apt repository holding exactly the locked .debs.
func localRepo(ctx context.Context, repo string, l *manifests.PackageLock, debs map[string]string) error {
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return err
	}
	var idx bytes.Buffer
	for _, p := range l.Packages {
		name := p.SHA256.Hex + ".deb"
		if err := os.Link(debs[p.Name], filepath.Join(repo, name)); err != nil {
			b, err := os.ReadFile(debs[p.Name])
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(repo, name), b, 0o644); err != nil {
				return err
			}
		}
		control, err := toolexec.Command(ctx, "dpkg-deb", "-f", debs[p.Name]).Output()
		if err != nil {
			return fmt.Errorf("reading the control file of %s: %w", p.Name, err)
		}
		idx.Write(bytes.TrimRight(control, "\n"))
		fmt.Fprintf(&idx, "\nFilename: ./%s\nSize: %d\nSHA256: %s\n\n", name, p.Size, p.SHA256.Hex)
	}
	return os.WriteFile(filepath.Join(repo, "Packages"), idx.Bytes(), 0o644)
}

// checkInstalled compares what dpkg says is installed with the lock.
func checkInstalled(rootfs string, l *manifests.PackageLock) error {
	out, err := exec.Command("dpkg-query", "--admindir", filepath.Join(rootfs, "var/lib/dpkg"), "-W", "-f", "${Package} ${Version}\n").Output()
	if err != nil {
		return fmt.Errorf("listing the VM's installed packages: %w", err)
	}
	installed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if n, v, ok := strings.Cut(line, " "); ok {
			installed[n] = v
		}
	}
	for _, p := range l.Packages {
		if installed[p.Name] != p.Version {
			return fmt.Errorf("the VM has %s %q installed, the lock says %q", p.Name, installed[p.Name], p.Version)
		}
		delete(installed, p.Name)
	}
	if len(installed) > 0 {
		return fmt.Errorf("the VM has packages the lock does not list: %v", installed)
	}
	return nil
}

func hashPath(p string) (int64, manifests.Digest, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, manifests.Digest{}, err
	}
	defer f.Close()
	h := newSHA256()
	n, err := f.WriteTo(h)
	if err != nil {
		return 0, manifests.Digest{}, err
	}
	return n, manifests.DigestFromHash(h), nil
}

func tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
