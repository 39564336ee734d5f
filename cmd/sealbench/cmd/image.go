//go:build !sealbench_bundle

package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/vmimages"
)

func newImageCmd(g *global) *cobra.Command {
	var bundlePath, key, out, arch, lockFile, variant string
	var insecure bool
	var debs debSettings
	c := &cobra.Command{
		Use:   "image",
		Short: "Build the Sandbox image from a bundle and pinned Debian packages",
		Long: `Build the Sandbox image: a base layer unpacked from the Debian packages a lock
file pins (a shell, coreutils, findutils, git, ripgrep and what they link; no maintainer
script runs), and a layer holding the bundle at /opt/sealbench. The bundle is
verified first. Writes, into --out:

  sandbox-image.tar    what ` + "`docker load`" + ` and the stand-in's image load take
  sandbox-image-oci/   the same image as an OCI layout
  sandbox-image.json   its identity: the image id (what docker inspect shows),
                       the manifest digest, the lock's and the layers' digests

Packages are taken from the cache (--cache), then from each --deb-source and
` + vmimages.SourcesEnv + `, then through apt as this machine configures it, then
from snapshot.debian.org (` + vmimages.SnapshotEnv + `=off skips it, or points it
elsewhere); every file is checked against the lock's size and SHA-256 before it
is cached by hash. Building twice, on two machines, gives the same image id.

--variant sandbox-tools builds the variant for suites that build code: the same
packages and Debian's rustc, cargo, nodejs and npm (the agent-tools suite's T6
and T7), written to the bundle's path + .tools.image. A run builds the variant
its suites need on first use.

When a locked package is in no source (Debian's archive keeps only current
versions), the image is built from a fresh lock, kept in the cache, with a
notice naming the packages that moved: its id then differs from the committed
one. --no-relock fails instead, naming every package and each source's answer.

An --out that is a file or lies inside the bundle, a --bundle that is a tar
(extract it first), and an --arch with no lock are refused (exit 3) before the
bundle is verified or a package fetched.`,
		Example: `  sealbench image --bundle out/build-linux-0123456789ab --out out/image
  sealbench image --bundle out/build-linux-0123456789ab --arch arm64 --json
  sealbench image --bundle oci://localhost:5000/bench/bundle:v1 --arch arm64 --out out/image-arm64
  sealbench image --bundle out/build-linux-0123456789ab --variant sandbox-tools   # cargo and npm too
  sealbench image --bundle out/build-linux-0123456789ab --deb-source /mnt/old-debs --no-relock
  sealbench image export-debs --out /mnt/old-debs   # carry the locked .debs to another machine
  sealbench image lock --arch all        # refresh vmimages/locks/ from apt`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if bundlePath == "" {
				return usageErrorf("pass --bundle out/build-linux-<hash>", "--bundle is required")
			}
			if err := debs.check(); err != nil {
				return err
			}
			if !slices.ContainsFunc(vmimages.Variants, func(v vmimages.Variant) bool { return v.Name == variant }) {
				return usageErrorf("--variant takes "+variantNames(), "no Sandbox image variant %q", variant)
			}
			p := newProgress(g.stderr, "image")
			defer p.Close()
			if ociartifact.IsRef(bundlePath) {
				// Pulled into the bundle cache; verified below as any bundle.
				if _, err := loadVerifier(key); err != nil {
					return err
				}
				pulled, err := orchestrate.PullBundle(c.Context(), bundlePath, insecure, p.Logf)
				if err != nil {
					return err
				}
				bundlePath = pulled.Dir
			}
			if out == "" {
				out = vmimages.ImageDir(bundlePath, variant)
			}
			if err := checkImageArgs(bundlePath, out, arch, lockFile); err != nil {
				return err
			}
			info, err := buildImage(c.Context(), p, bundlePath, key, out, arch, variant, lockFile, debs)
			p.Close()
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, info)
			}
			fmt.Fprintf(g.stdout, "%s\n  id        %s\n  manifest  %s\n  tar       %s\n  layout    %s\n",
				info.Ref, info.ID, info.ManifestDigest, info.Tar, info.Layout)
			return nil
		},
	}
	c.Flags().StringVar(&bundlePath, "bundle", "", "verified bundle directory to put at /opt/sealbench, or oci://REGISTRY/REPO[:TAG|@DIGEST] to pull it from (required)")
	c.Flags().BoolVar(&insecure, "insecure", false, "with --bundle oci://: allow plain HTTP to a registry that is not on loopback")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to verify the bundle with")
	c.Flags().StringVar(&out, "out", "", "directory to write the image into (default: the bundle's path + .image, or + .tools.image for sandbox-tools)")
	c.Flags().StringVar(&variant, "variant", vmimages.VariantSandbox, "which image: "+variantNames()+" (the twelve cells' tools, or those and rustc, cargo, nodejs and npm)")
	c.Flags().StringVar(&arch, "arch", "amd64", "Debian architecture of the image: amd64 or arm64")
	c.Flags().StringVar(&lockFile, "lock", "", "package lock to build from (default: the one built into sealbench for --arch)")
	debs.flags(c.Flags())
	c.AddCommand(newImageLockCmd(g), newImageVMCmd(g), newExportDebsCmd(g))
	return c
}

// checkImageArgs refuses, before the bundle is verified or a package
// fetched: a bundle that is not a directory, an --out that is a file or
// lies inside the bundle (the image's files would change the bundle), a
// --lock that is one of the files the image writes, an unknown --arch.
func checkImageArgs(bundlePath, out, arch, lockFile string) error {
	if err := orchestrate.CheckBundleArgs(bundlePath, "", "the image holds the bundle's files"); err != nil {
		return err
	}
	if err := checkOutDir("--out", out, "pass a directory (default: the bundle's path + .image)"); err != nil {
		return err
	}
	if within(out, bundlePath) {
		return usageErrorf("pass an --out outside the bundle (default: the bundle's path + .image)", "--out %s is inside the bundle %s: the image's files would change the bundle it verifies", out, bundlePath)
	}
	if lockFile != "" {
		for _, n := range []string{vmimages.SandboxLock, vmimages.SandboxInfo, vmimages.SandboxTar} {
			if sameFile(lockFile, filepath.Join(out, n)) {
				return usageErrorf("copy the lock elsewhere, or pass another --out", "--lock %s is %s, which the image build writes", lockFile, n)
			}
		}
	} else if !slices.Contains(vmimages.Arches, arch) {
		return usageErrorf("--arch takes "+strings.Join(vmimages.Arches, " or ")+", or pass --lock", "no Sandbox image for architecture %q", arch)
	}
	return nil
}

// buildImage verifies the bundle, then builds its image from the manifest
// just verified (orchestrate.BuildSandboxImage).
func buildImage(ctx context.Context, p *progress, bundlePath, key, out, arch, variant, lockFile string, debs debSettings) (*vmimages.ImageInfo, error) {
	v, err := loadVerifier(key)
	if err != nil {
		return nil, err
	}
	res, err := bundle.VerifyDir(ctx, bundlePath, bundle.VerifyOptions{Verifier: v})
	if err != nil {
		return nil, err
	}
	p.Logf("verified %s", res.Name)
	return orchestrate.BuildSandboxImage(ctx, bundlePath, res.Manifest, out, arch, variant, lockFile, debs.options(), p.Logf)
}

// variantNames lists the Sandbox image's variants for help and errors.
func variantNames() string {
	return strings.Join(imageNames()[:len(vmimages.Variants)], " or ")
}

func newImageLockCmd(g *global) *cobra.Command {
	var arch, out, cache, images string
	c := &cobra.Command{
		Use:   "lock",
		Short: "Resolve the images' packages through apt and write the lock files",
		Long: `Resolve the images' packages through apt as this machine configures it, in a
private apt state directory, and write the exact versions and SHA-256 to lock
files: sandbox-<arch>.json (coreutils, dash, findutils, git, ripgrep and
their dependencies, less what the cells and suites never run),
sandbox-tools-<arch>.json (those, and rustc, cargo, nodejs and npm, less the C
toolchain and node-gyp) and vm-<arch>.json (a bootable
Debian for Lima: Debian's required set, systemd, cloud-init, ssh, the cloud
kernel, fuse3, git). Building never resolves versions; this does.`,
		Example: `  sealbench image lock --arch all
  sealbench image lock --arch amd64 --out /tmp/locks --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			arches := []string{arch}
			if arch == "all" {
				arches = vmimages.Arches
			}
			if out != "" {
				if err := checkOutDir("--out", out, "pass the directory for the lock files"); err != nil {
					return err
				}
			} else {
				root, err := bundle.FindModuleRoot(".")
				if err != nil {
					return usageErrorf("pass --out", "%v", err)
				}
				out = filepath.Join(root, "vmimages", "locks")
			}
			p := newProgress(g.stderr, "image lock")
			defer p.Close()
			var written []lockWritten
			type job struct{ name, arch string }
			var jobs []job
			for _, a := range arches {
				for _, n := range imageNames() {
					if images == "all" || images == n {
						jobs = append(jobs, job{n, a})
					}
				}
			}
			if len(jobs) == 0 {
				return usageErrorf("--images takes "+strings.Join(imageNames(), ", ")+" or all", "no image named %q", images)
			}
			for _, j := range jobs {
				var l *manifests.PackageLock
				var err error
				if j.name == "vm" {
					l, err = vmimages.LockVM(c.Context(), cache, j.arch, time.Now(), p.Logf)
				} else {
					i := slices.IndexFunc(vmimages.Variants, func(v vmimages.Variant) bool { return v.Name == j.name })
					l, err = vmimages.Lock(c.Context(), cache, j.name, j.arch, vmimages.Variants[i].Spec, time.Now(), p.Logf)
				}
				if err != nil {
					return err
				}
				b, err := l.Marshal()
				if err != nil {
					return err
				}
				path := filepath.Join(out, fmt.Sprintf("%s-%s.json", j.name, j.arch))
				var moved []manifests.PackageChange
				if ob, err := os.ReadFile(path); err == nil {
					if old, err := manifests.ParsePackageLock(ob); err == nil {
						moved = manifests.DiffLocks(old, l)
					}
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
					return err
				}
				written = append(written, lockWritten{Path: path, Packages: len(l.Packages), Moved: moved})
				p.Logf("wrote %s (%d packages, %d moved)", path, len(l.Packages), len(moved))
			}
			p.Close()
			if g.json {
				return writeJSON(g.stdout, map[string]any{"locks": written})
			}
			for _, w := range written {
				fmt.Fprintf(g.stdout, "%s: %d packages, %d moved\n", w.Path, w.Packages, len(w.Moved))
				for _, m := range w.Moved {
					fmt.Fprintf(g.stdout, "  %s\n", m)
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&arch, "arch", "all", "Debian architecture: amd64, arm64 or all")
	c.Flags().StringVar(&images, "images", "all", "which locks: "+strings.Join(imageNames(), ", ")+" or all")
	c.Flags().StringVar(&out, "out", "", "directory for the lock files (default: vmimages/locks in the source tree)")
	c.Flags().StringVar(&cache, "cache", vmimages.DefaultCacheDir(), "where apt state is cached")
	return c
}

// imageNames are the images with a committed lock: the Sandbox image's
// variants and the VM image.
func imageNames() []string {
	var names []string
	for _, v := range vmimages.Variants {
		names = append(names, v.Name)
	}
	return append(names, "vm")
}

// lockWritten is one lock file `image lock` wrote, with the versions that
// moved against the file it replaced (the lines a relock commit names).
type lockWritten struct {
	Path     string                    `json:"path"`
	Packages int                       `json:"packages"`
	Moved    []manifests.PackageChange `json:"moved"`
}

func newImageVMCmd(g *global) *cobra.Command {
	var arch, lockFile, size string
	var debs debSettings
	c := &cobra.Command{
		Use:   "vm",
		Short: "Build the bootable VM disk (qcow2) with its kernel and initrd, for Lima",
		Long: `Build a bootable Debian disk image for VM targets from the packages
vmimages/locks/vm-<arch>.json pins: mmdebstrap installs exactly those .debs
(from a local repository of the verified, cached packages; maintainer scripts
run inside the new root, never on the host), the root filesystem is written
straight onto the disk as ext4 (no partition table, no bootloader: Lima boots
the kernel and initrd given beside it), and every file gets a SHA-256 recorded
next to it. The result is cached by the lock's digest. Needs root, mmdebstrap,
e2fsprogs and qemu-utils; takes a few minutes and a few hundred MB.

Packages come from the same sources as ` + "`sealbench image`" + `'s. The VM image is a
fixture for VM targets, not a published artifact: when the lock's packages are
in no source, it is built from a fresh lock (kept beside the image as lock.json)
with a loud notice, and the VM targets find it there; --no-relock fails instead.`,
		Example: `  sealbench image vm
  sealbench image vm --arch amd64 --size 8G --json
  sealbench image vm --deb-source /mnt/old-debs --no-relock   # exactly the committed lock, or fail`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := debs.check(); err != nil {
				return err
			}
			if err := checkDiskSize(size); err != nil {
				return err
			}
			var lock *manifests.PackageLock
			var lb []byte
			var err error
			if lockFile == "" {
				if lock, lb, err = vmimages.DefaultLock("vm", arch); err != nil {
					return usageErrorf("--arch takes amd64 or arm64, or pass --lock", "%v", err)
				}
			} else if lb, err = manifests.ReadRegular(lockFile, 0); err != nil {
				return usageErrorf("--lock takes a package lock file, as `sealbench image lock` writes (vmimages/locks/*.json)", "reading package lock: %v", err)
			} else if lock, err = manifests.ParsePackageLock(lb); err != nil {
				return usageErrorf("refresh it with `sealbench image lock`", "package lock %s: %v", lockFile, err)
			}
			p := newProgress(g.stderr, "image vm")
			defer p.Close()
			img, err := vmimages.BuildVM(c.Context(), vmimages.VMOptions{Lock: lock, LockBytes: lb, CacheDir: debs.cacheDir(), Sources: debs.sources, Relock: !debs.noRelock, DiskSize: size, Log: p.Logf})
			p.Close()
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, img)
			}
			fmt.Fprintf(g.stdout, "VM image for %s in %s\n", img.Arch, img.Dir)
			for _, n := range []string{vmimages.VMDisk, vmimages.VMKernel, vmimages.VMInitrd} {
				fmt.Fprintf(g.stdout, "  %-11s %s\n", n, img.Files[n])
			}
			fmt.Fprintf(g.stdout, "  cmdline     %s\n", img.Cmdline)
			if img.Relock != nil {
				fmt.Fprintf(g.stdout, "  lock        %s (FRESH: the committed lock's packages are in no source)\n", img.Path(vmimages.VMLock))
			}
			return nil
		},
	}
	c.Flags().StringVar(&arch, "arch", "amd64", "Debian architecture: amd64 or arm64")
	c.Flags().StringVar(&lockFile, "lock", "", "package lock to build from (default: the one built into sealbench)")
	debs.flags(c.Flags())
	c.Flags().StringVar(&size, "size", "4G", "the disk's virtual size, 2G to 4T (K, M, G or T)")
	return c
}

// Bounds of image vm --size: a Debian root with systemd and a kernel
// needs about a GiB; more than a few TiB is a typo.
const (
	minDiskSize = 2 << 30
	maxDiskSize = 4 << 40
)

// checkDiskSize refuses a --size mkfs.ext4 would refuse, or one too small
// for the image, before minutes of mmdebstrap.
func checkDiskSize(size string) error {
	hint := "--size takes a size such as 4G (K, M, G or T; 2G to 4T)"
	num := strings.TrimRight(size, "KMGT")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || len(size)-len(num) > 1 || n <= 0 {
		return usageErrorf(hint, "--size %q is not a size", size)
	}
	mult := int64(1)
	if len(num) < len(size) {
		mult = int64(1) << (10 * (strings.IndexByte("KMGT", size[len(size)-1]) + 1))
	}
	if n > maxDiskSize/mult || n*mult < minDiskSize {
		return usageErrorf(hint, "--size %s is out of range", size)
	}
	return nil
}

func newExportDebsCmd(g *global) *cobra.Command {
	var arch, images, lockFile, out string
	var debs debSettings
	c := &cobra.Command{
		Use:   "export-debs",
		Short: "Write the locked .debs of the images into a directory, to carry to another machine",
		Long: `Write the exact, verified .deb files the image locks pin into --out (under their
pool file names, with each lock beside them as lock-NAME-ARCH.json). Packages
the cache lacks are fetched first (from --deb-source, apt, snapshot.debian.org);
an export never relocks. On another machine, give the directory to any command
that builds an image (--deb-source DIR, or ` + vmimages.SourcesEnv + `=DIR): it then
builds the committed images, with their committed ids, even after Debian's
archive has moved on.`,
		Example: `  sealbench image export-debs --out /mnt/usb/sealbench-debs
  sealbench image export-debs --images sandbox --arch amd64 --out debs --json
  # on the other machine:
  sealbench image vm --deb-source /mnt/usb/sealbench-debs --no-relock`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("pass --out DIR", "--out is required")
			}
			if fi, err := os.Stat(out); err == nil && !fi.IsDir() {
				return usageErrorf("pass a directory", "--out %s is a file", out)
			}
			if err := debs.check(); err != nil {
				return err
			}
			arches := []string{arch}
			if arch == "all" {
				arches = vmimages.Arches
			}
			type job struct {
				lock  *manifests.PackageLock
				bytes []byte
			}
			var jobs []job
			if lockFile != "" {
				b, err := manifests.ReadRegular(lockFile, 0)
				if err != nil {
					return usageErrorf("--lock takes a package lock file, as `sealbench image lock` writes (vmimages/locks/*.json)", "reading package lock: %v", err)
				}
				l, err := manifests.ParsePackageLock(b)
				if err != nil {
					return usageErrorf("", "package lock %s: %v", lockFile, err)
				}
				jobs = append(jobs, job{l, b})
			} else {
				for _, a := range arches {
					for _, n := range imageNames() {
						if images != "all" && images != n {
							continue
						}
						l, b, err := vmimages.DefaultLock(n, a)
						if err != nil {
							return usageErrorf("--arch takes amd64, arm64 or all", "%v", err)
						}
						jobs = append(jobs, job{l, b})
					}
				}
				if len(jobs) == 0 {
					return usageErrorf("--images takes "+strings.Join(imageNames(), ", ")+" or all", "no image named %q", images)
				}
			}
			p := newProgress(g.stderr, "image export-debs")
			defer p.Close()
			var done []*vmimages.Exported
			for _, j := range jobs {
				ex, err := vmimages.ExportDebs(c.Context(), j.lock, j.bytes, out, vmimages.FetchOptions{CacheDir: debs.cacheDir(), Sources: debs.sources, Log: p.Logf})
				if err != nil {
					return fmt.Errorf("exporting the %s-%s lock's packages: %w", j.lock.Name, j.lock.Arch, err)
				}
				p.Logf("exported %d packages (%s) of %s", ex.Packages, humanBytes(ex.Bytes), ex.Lock)
				done = append(done, ex)
			}
			p.Close()
			if g.json {
				return writeJSON(g.stdout, map[string]any{"dir": out, "exported": done})
			}
			for _, ex := range done {
				fmt.Fprintf(g.stdout, "%-14s %4d packages  %9s  %s\n", ex.Lock, ex.Packages, humanBytes(ex.Bytes), ex.LockFile)
			}
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "directory to write the .debs into (required)")
	c.Flags().StringVar(&arch, "arch", "amd64", "Debian architecture: amd64, arm64 or all")
	c.Flags().StringVar(&images, "images", "all", "which locks: "+strings.Join(imageNames(), ", ")+" or all")
	c.Flags().StringVar(&lockFile, "lock", "", "export this lock file's packages instead")
	debs.flags(c.Flags())
	c.Flags().Lookup("no-relock").Hidden = true // an export never relocks
	return c
}
