package vmimages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/manifests"
)

// File names of a built Sandbox image, in the output directory.
const (
	SandboxTar    = "sandbox-image.tar"  // `docker save` format
	SandboxLayout = "sandbox-image-oci"  // OCI image layout
	SandboxInfo   = "sandbox-image.json" // ImageInfo
	SandboxLock   = "sandbox-lock.json"  // the package lock the image was built from, byte for byte
	// BundleMount is where the bundle sits inside the image.
	BundleMount = "/opt/sealbench"
	// Repository is the default image's repository (VariantTools's is
	// sealbench/sandbox-tools); the tag is the bundle's name.
	Repository = "sealbench/sandbox"
)

// ImageInfo identifies a built Sandbox image. ID is what `docker inspect`
// and the stand-in report (the config's digest); ManifestDigest is the OCI
// identity.
type ImageInfo struct {
	Ref            string           `json:"ref"`
	ID             manifests.Digest `json:"id"`
	ManifestDigest manifests.Digest `json:"manifestDigest"`
	Arch           string           `json:"arch"`
	Bundle         string           `json:"bundle"`
	LockDigest     manifests.Digest `json:"lockDigest"`
	// Lock is the file beside the image holding the lock it was built
	// from; Relock says why that is not the lock it was given, if it is not.
	Lock        string           `json:"lock"`
	Relock      *Relock          `json:"relock,omitempty"`
	BaseLayer   manifests.Digest `json:"baseLayer"`
	BundleLayer manifests.Digest `json:"bundleLayer"`
	Tar         string           `json:"tar"`
	TarDigest   manifests.Digest `json:"tarDigest"`
	Layout      string           `json:"layout"`
	Elapsed     time.Duration    `json:"elapsedNanos"`
}

// SandboxOptions says what to build.
type SandboxOptions struct {
	// Bundle is a bundle directory that has been verified.
	Bundle   string
	Manifest *manifests.BundleManifest
	// Lock pins the packages; LockBytes are its exact bytes (for the digest).
	Lock      *manifests.PackageLock
	LockBytes []byte
	CacheDir  string
	// Sources and Relock: see FetchOptions.
	Sources []string
	Relock  bool
	OutDir  string
	Log     func(string, ...any)
}

// BuildSandbox builds the Sandbox image: the locked packages as the base
// layer, the bundle at /opt/sealbench as the second, written as a
// `docker save` tar and an OCI layout, with ImageInfo beside them.
func BuildSandbox(ctx context.Context, o SandboxOptions) (*ImageInfo, error) {
	start := time.Now()
	fetch := FetchOptions{CacheDir: o.CacheDir, Sources: o.Sources, Relock: o.Relock, Log: o.Log}
	fetch.fillDefaults()
	logf := fetch.Log
	pk, err := getPackages(ctx, o.Lock, o.LockBytes, fetch)
	if err != nil {
		return nil, err
	}
	if pk.relock != nil {
		logf("%s", pk.relock.Notice("Sandbox image"))
	}
	o.Lock, o.LockBytes = pk.lock, pk.bytes
	logf("unpacking %d packages into the base layer", len(pk.debs))
	base, err := baseLayer(ctx, o.Lock, pk.debs)
	if err != nil {
		return nil, err
	}
	bl, bundleName, err := bundleLayer(o.Bundle, o.Manifest)
	if err != nil {
		return nil, err
	}
	img, err := sandboxImage(o.Lock, manifests.DigestOf(o.LockBytes), bundleName, o.Manifest.Source.Time, base, bl)
	if err != nil {
		return nil, err
	}
	info, err := writeImage(img, o.OutDir, repository(o.Lock.Name), bundleName)
	if err != nil {
		return nil, err
	}
	info.Arch = o.Lock.Arch
	info.Bundle = bundleName
	info.LockDigest = manifests.DigestOf(o.LockBytes)
	info.Lock = filepath.Join(o.OutDir, SandboxLock)
	info.Relock = pk.relock
	if err := atomicfile.WriteFile(info.Lock, o.LockBytes, 0o644); err != nil {
		return nil, err
	}
	info.BaseLayer = manifests.DigestOf(base)
	info.BundleLayer = manifests.DigestOf(bl)
	info.Elapsed = time.Since(start)
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(o.OutDir, SandboxInfo), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	logf("image %s: id %s (%.1fs)", info.Ref, info.ID, info.Elapsed.Seconds())
	return info, nil
}

// bundleLayer puts the bundle's Linux files at opt/sealbench with the
// manifest's modes and the bundle's source time, and returns it with the
// bundle's name. It reads only the files the manifest lists, its
// manifest and signature, and checks again that what it read is what the
// manifest says; SHA256SUMS is written for the files the image holds.
func bundleLayer(dir string, m *manifests.BundleManifest) ([]byte, string, error) {
	b := newLayerBuilder(m.Source.Time)
	root := strings.TrimPrefix(BundleMount, "/")
	add := func(rel string, mode int64) ([]byte, error) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("reading bundle file: %w", err)
		}
		b.file(root+"/"+rel, mode, data)
		return data, nil
	}
	for _, f := range m.Files {
		if !manifests.InSandbox(f.Path) {
			continue // another OS's runner: it stays in the bundle
		}
		data, err := add(f.Path, int64(f.Mode))
		if err != nil {
			return nil, "", err
		}
		if manifests.DigestOf(data) != f.Digest {
			return nil, "", fmt.Errorf("bundle file %s changed after verification", f.Path)
		}
	}
	var name string
	// SHA256SUMS lists what the image holds, so that `sha256sum -c` in a
	// Sandbox checks every file there.
	b.file(root+"/"+manifests.SumsFile, 0o644, m.SandboxSHA256SUMS())
	for _, f := range []string{manifests.ManifestFile, manifests.SignatureFile} {
		data, err := add(f, 0o644)
		if err != nil {
			return nil, "", err
		}
		if f == manifests.ManifestFile {
			name = manifests.BundleName(data)
			if again, err := m.Marshal(); err != nil || !bytes.Equal(again, data) {
				return nil, "", fmt.Errorf("bundle %s: manifest.json changed after verification", dir)
			}
		}
	}
	layer, err := b.bytes()
	return layer, name, err
}

func sandboxImage(l *manifests.PackageLock, lockDigest manifests.Digest, bundleName string, created time.Time, base, bundle []byte) (v1.Image, error) {
	ct := v1.Time{Time: created.UTC()}
	cfg := &v1.ConfigFile{
		Architecture: GoArch(l.Arch),
		OS:           "linux",
		Created:      ct,
		Config: v1.Config{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd:        []string{"/bin/sh"},
			WorkingDir: "/",
			Labels: map[string]string{
				"sealbench.bundle":                 bundleName,
				"sealbench.lock":                   lockDigest.String(),
				"org.opencontainers.image.created": created.UTC().Format(time.RFC3339),
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img,
		mutate.Addendum{Layer: static.NewLayer(base, types.OCIUncompressedLayer), History: v1.History{
			Created: ct, CreatedBy: fmt.Sprintf("sealbench: %d Debian packages for %s (lock %s)", len(l.Packages), l.Arch, lockDigest),
		}},
		mutate.Addendum{Layer: static.NewLayer(bundle, types.OCIUncompressedLayer), History: v1.History{
			Created: ct, CreatedBy: "sealbench: bundle " + bundleName + " at " + BundleMount,
		}},
	)
}

// WriteSandbox writes a Sandbox image built elsewhere (pulled from a
// registry by digest) into outDir as BuildSandbox writes one: the `docker
// save` tar, the OCI layout, the package lock it was built from (lockBytes,
// which its config's sealbench.lock label must name) and ImageInfo beside
// them. What the image is worth is for the caller to check: its id against
// the bundle's signed provenance.
func WriteSandbox(img v1.Image, outDir, bundleName string, lockBytes []byte) (*ImageInfo, error) {
	lock, err := manifests.ParsePackageLock(lockBytes)
	if err != nil {
		return nil, fmt.Errorf("the Sandbox image's lock: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the Sandbox image's config: %w", err)
	}
	lockDigest := manifests.DigestOf(lockBytes)
	if got := cfg.Config.Labels["sealbench.lock"]; got != lockDigest.String() {
		return nil, fmt.Errorf("the Sandbox image was built from lock %q, not the lock given (%s)", got, lockDigest)
	}
	if got := cfg.Config.Labels["sealbench.bundle"]; got != bundleName {
		return nil, fmt.Errorf("the Sandbox image holds bundle %q, not %s", got, bundleName)
	}
	info, err := writeImage(img, outDir, repository(lock.Name), bundleName)
	if err != nil {
		return nil, err
	}
	info.Arch, info.Bundle, info.LockDigest = lock.Arch, bundleName, lockDigest
	info.Lock = filepath.Join(outDir, SandboxLock)
	if err := atomicfile.WriteFile(info.Lock, lockBytes, 0o644); err != nil {
		return nil, err
	}
	if ls, err := img.Layers(); err == nil && len(ls) == 2 {
		for i, d := range []*manifests.Digest{&info.BaseLayer, &info.BundleLayer} {
			if h, err := ls[i].Digest(); err == nil {
				*d = manifests.Digest{Algorithm: h.Algorithm, Hex: h.Hex}
			}
		}
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(outDir, SandboxInfo), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return info, nil
}

// writeImage writes the docker save tar and the OCI layout into outDir,
// each atomically, the image named repo:bundleName.
func writeImage(img v1.Image, outDir, repo, bundleName string) (*ImageInfo, error) {
	ref, err := name.NewTag(repo + ":" + bundleName)
	if err != nil {
		return nil, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	mdg, err := img.Digest()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	info := &ImageInfo{
		Ref:            ref.String(),
		ID:             manifests.Digest{Algorithm: cfgName.Algorithm, Hex: cfgName.Hex},
		ManifestDigest: manifests.Digest{Algorithm: mdg.Algorithm, Hex: mdg.Hex},
		Tar:            filepath.Join(outDir, SandboxTar),
		Layout:         filepath.Join(outDir, SandboxLayout),
	}

	// An image build that was stopped left its staging directory here;
	// this one removes it (never a live build's), and keeps its own
	// temporaries in one of its own.
	scratch.Sweep(outDir) // what it cannot remove is no reason to stop
	work, err := scratch.Make(outDir, "image")
	if err != nil {
		return nil, err
	}
	defer work.Remove()
	f, err := os.Create(filepath.Join(work.Path, SandboxTar))
	if err != nil {
		return nil, err
	}
	hw := &hashingWriter{w: f, h: newSHA256()}
	if err := tarball.Write(ref, img, hw); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", SandboxTar, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	f.Close()
	info.TarDigest = manifests.DigestFromHash(hw.h)

	tmpLayout := filepath.Join(work.Path, SandboxLayout)
	lp, err := layout.Write(tmpLayout, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.String(),
	})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := os.Chmod(tmpLayout, 0o755); err != nil {
		return nil, err
	}

	if err := os.Rename(f.Name(), info.Tar); err != nil {
		return nil, err
	}
	if err := os.Rename(info.Layout, filepath.Join(work.Path, SandboxLayout+".old")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.Rename(tmpLayout, info.Layout); err != nil {
		return nil, err
	}
	return info, atomicfile.SyncDir(outDir)
}

type hashingWriter struct {
	w io.Writer
	h hash.Hash
}

func (h *hashingWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	return n, err
}

func newSHA256() hash.Hash { return sha256.New() }
