package orchestrate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/vmimages"
)

// Exit codes of the sealbench binary beyond cliutil's.
const (
	// ExitMismatch: verification found contents that differ from the
	// signed manifest; a sample failed; the audit found leftovers.
	ExitMismatch = 1
	// ExitSignature: the signature is missing or untrusted, or the bundle
	// is not the one --id pins.
	ExitSignature = 2
)

func usagef(hint, format string, args ...any) error { return cliutil.Usagef(hint, format, args...) }

// BundleOptions says which bundle to open, and how to find its image.
type BundleOptions struct {
	// Dir is the bundle directory, or an oci:// reference to pull it from
	// (into the bundle cache, by digest); empty seals Source (default:
	// the tree around the working directory) with a throw-away key.
	Dir    string
	Source string
	// SuiteDirs are suites of the user's own that a seal of Source
	// seals in too.
	SuiteDirs []string
	Key       string // the public key to verify with
	Expect    string // pin the bundle's name (--id); empty: any
	// Insecure allows plain HTTP to a registry not on loopback.
	Insecure bool
	// Debs says where the Sandbox image's packages come from when the
	// image has to be built.
	Debs Debs
	// Variant is the Sandbox image to load (vmimages.VariantFor the run's
	// suites); empty is the default, vmimages.VariantSandbox.
	Variant string
	Log     func(string, ...any)
}

// Debs is where locked Debian packages come from when an image is built.
type Debs struct {
	CacheDir string   // empty: vmimages' default
	Sources  []string // --deb-source
	NoRelock bool     // fail rather than build from a fresh lock
}

// Bundle is a verified bundle and its Sandbox image.
type Bundle struct {
	Dir      string
	Key      string // the public key it was verified with
	Verified *bundle.VerifyResult
	Image    engine.Image
	// Origin is the registry reference the bundle was pulled from and the
	// digest it resolved to; nil for a directory.
	Origin *manifests.BundleOrigin
	// Attestation is the Sigstore bundle checked with the bundle, when it
	// was pulled from a registry with one attached.
	Attestation *BundleAttestation
}

// CheckBundleArgs checks what a command was given before anything runs:
// --id must be a bundle name, and --bundle a directory (a command that
// runs the bundle's binaries cannot take its tar).
func CheckBundleArgs(dir, expect, why string) error {
	if expect != "" && manifests.ValidateBundleID(expect) != nil {
		return usagef("--id takes a bundle name such as build-linux-0123456789ab (seal prints it)", "--id %.80q is not a bundle name", expect)
	}
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return usagef("extract it (tar -xf "+dir+") and pass the directory", "--bundle %s is a file: %s, so it takes the bundle directory", dir, why)
	}
	return nil
}

// OpenBundle verifies the bundle once and finds or builds its Sandbox
// image (from the manifest just verified: nothing is verified twice).
func OpenBundle(ctx context.Context, o BundleOptions) (*Bundle, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	b := &Bundle{Dir: o.Dir, Key: o.Key}
	if b.Dir == "" {
		var err error
		if b.Dir, b.Key, err = SealThrowaway(ctx, o.Source, o.SuiteDirs, logf); err != nil {
			return nil, err
		}
	}
	var pulled *ociartifact.Pulled
	if ociartifact.IsRef(b.Dir) {
		// The key is checked before anything is fetched.
		if _, err := LoadVerifier(b.Key); err != nil {
			return nil, err
		}
		p, err := PullBundle(ctx, b.Dir, o.Insecure, logf)
		if err != nil {
			return nil, err
		}
		d, err := manifests.ParseDigest(p.Digest)
		if err != nil {
			return nil, err
		}
		pulled, b.Dir, b.Origin = p, p.Dir, &manifests.BundleOrigin{Ref: p.Ref, Digest: d}
	}
	if err := CheckBundleArgs(b.Dir, o.Expect, "the bundle's binaries run from it"); err != nil {
		return nil, err
	}
	v, err := LoadVerifier(b.Key)
	if err != nil {
		return nil, err
	}
	if b.Verified, err = bundle.VerifyDir(ctx, b.Dir, bundle.VerifyOptions{Verifier: v, Expect: o.Expect}); err != nil {
		var ce *bundle.ContentError
		if pulled != nil && errors.As(err, &ce) {
			ce.Bundle = pulled.Reference + " (pulled into " + ce.Bundle + ")"
		}
		return nil, err
	}
	logf("verified %s (key %s)", b.Verified.Name, v.KeyID())
	attested := false
	if pulled != nil {
		// A pulled bundle is checked as verify checks it: its attached
		// Sigstore bundle too, and the Sandbox image the artifact names
		// against the one the provenance signed.
		switch b.Attestation, err = VerifyAttestation(b.Dir, b.Verified, v); {
		case errors.Is(err, ErrNoAttestation):
			b.Attestation = nil
			logf("%s has no Sigstore bundle attached: checked %s alone", pulled.Reference, manifests.SignatureFile)
		case err != nil:
			return nil, err
		default:
			logf("checked the attached Sigstore bundle: SLSA provenance v1, %d subjects", b.Attestation.Subjects)
		}
		if attested, err = CheckPulledImage(pulled, b.Attestation); err != nil {
			return nil, err
		}
		if err := pulledSandboxImage(ctx, pulled, b.Verified, attested, logf); err != nil {
			return nil, err
		}
	}
	if b.Image, err = sandboxImage(ctx, b.Dir, b.Verified, o.Debs, o.Variant, logf); err != nil {
		return nil, err
	}
	if attested && b.Image.ID != b.Attestation.Image.Config {
		return nil, fmt.Errorf("the Sandbox image in %s.image is %s, the bundle's signed provenance names %s: remove that directory and pull again", b.Dir, b.Image.ID, b.Attestation.Image.Config)
	}
	return b, nil
}

// LoadVerifier loads the public key to verify bundles with; no key at all
// is a signature problem (exit 2), not a broken file.
func LoadVerifier(key string) (*sign.Verifier, error) {
	v, err := sign.LoadPublicKey(key)
	if err != nil {
		if _, statErr := os.Stat(key); errors.Is(statErr, fs.ErrNotExist) {
			return nil, &cliutil.UserError{Code: ExitSignature, Err: fmt.Errorf("no public key at %s to check the signature against", key),
				Hint: "pass --key with the public key of whoever sealed the bundle"}
		}
		return nil, err
	}
	return v, nil
}

// SealThrowaway seals the source tree around the working directory (or
// source) into out/throwaway/ with a throw-away key pair kept there (made
// on first use, with an empty password), and returns the bundle and the
// public key. Its Sandbox image is built next to it on first use, and
// reused while the source does not change.
func SealThrowaway(ctx context.Context, source string, suiteDirs []string, logf func(string, ...any)) (bundleDir, pubKey string, err error) {
	// The tree is checked before the throw-away keys are made.
	source, err = bundle.SourceRoot(source)
	if err != nil {
		return "", "", usagef("run it inside a sealbench checkout, or pass --bundle (or --source)", "no --bundle, and no source tree to seal: %v", err)
	}
	dir := filepath.Join("out", "throwaway")
	privKey, pubKey := filepath.Join(dir, sign.PrivateKeyFile), filepath.Join(dir, sign.PublicKeyFile)
	if _, err := os.Stat(privKey); err != nil {
		if _, _, err := sign.WriteKeyPair(dir, nil, false); err != nil {
			return "", "", fmt.Errorf("making a throw-away key pair in %s: %w", dir, err)
		}
	}
	signer, err := sign.LoadPrivateKey(privKey, nil)
	if err != nil {
		return "", "", fmt.Errorf("the throw-away key %s (remove %s to make a new one): %w", privKey, dir, err)
	}
	logf("no --bundle: sealing %s into %s with a throw-away key (%s): such a bundle proves only that it was built here", source, dir, pubKey)
	sealed, err := bundle.Seal(ctx, bundle.SealOptions{Source: source, OutDir: dir, SuiteDirs: suiteDirs, Signer: signer, Log: logf})
	if err != nil {
		return "", "", err
	}
	return sealed.Dir, pubKey, nil
}

// BuildSandboxImage builds the Sandbox image of the bundle in dir, whose
// manifest was just verified (or sealed), into out, for arch, from the
// lock in lockFile (empty: variant's committed one).
func BuildSandboxImage(ctx context.Context, dir string, manifest *manifests.BundleManifest, out, arch, variant, lockFile string, debs Debs, logf func(string, ...any)) (*vmimages.ImageInfo, error) {
	lock, lockBytes, err := LoadLock(lockFile, variant, arch)
	if err != nil {
		return nil, err
	}
	return vmimages.BuildSandbox(ctx, vmimages.SandboxOptions{
		Bundle: dir, Manifest: manifest, Lock: lock, LockBytes: lockBytes,
		CacheDir: debs.CacheDir, Sources: debs.Sources, Relock: !debs.NoRelock, OutDir: out, Log: logf,
	})
}

// LoadLock reads a package lock: variant's committed lock for arch
// (vmimages.VariantSandbox when variant is empty) when lockFile is empty.
func LoadLock(lockFile, variant, arch string) (*manifests.PackageLock, []byte, error) {
	if lockFile == "" {
		l, b, err := vmimages.DefaultLock(cmp.Or(variant, vmimages.VariantSandbox), arch)
		if err != nil {
			return nil, nil, usagef("--arch takes amd64 or arm64, or pass --lock", "%v", err)
		}
		return l, b, nil
	}
	b, err := manifests.ReadRegular(lockFile, 0)
	if err != nil {
		return nil, nil, usagef("--lock takes a package lock file (vmimages/locks/*.json)", "reading package lock: %v", err)
	}
	l, err := manifests.ParsePackageLock(b)
	if err != nil {
		return nil, nil, usagef("refresh it with `sealbench image lock`", "package lock %s: %v", lockFile, err)
	}
	return l, b, nil
}

// sandboxImage takes the bundle's Sandbox image of variant from its
// directory (vmimages.ImageDir: <bundle>.image/ for the default), or
// builds it there when it is missing.
func sandboxImage(ctx context.Context, bundleDir string, res *bundle.VerifyResult, debs Debs, variant string, logf func(string, ...any)) (engine.Image, error) {
	dir := vmimages.ImageDir(bundleDir, variant)
	b, err := os.ReadFile(filepath.Join(dir, vmimages.SandboxInfo))
	if errors.Is(err, fs.ErrNotExist) {
		logf("no Sandbox image in %s: building it from the pinned packages", dir)
		info, err := BuildSandboxImage(ctx, bundleDir, res.Manifest, dir, runtime.GOARCH, variant, "", debs, logf)
		if err != nil {
			return engine.Image{}, fmt.Errorf("building the Sandbox image (or run `sealbench image --bundle %s%s`): %w", bundleDir, variantFlag(variant), err)
		}
		return imageOf(dir, info, logf)
	}
	if err != nil {
		return engine.Image{}, fmt.Errorf("reading the Sandbox image's identity: %w", err)
	}
	var info vmimages.ImageInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return engine.Image{}, usagef("rebuild it with `sealbench image --bundle "+bundleDir+variantFlag(variant)+"`", "%s: %v", filepath.Join(dir, vmimages.SandboxInfo), err)
	}
	if info.Bundle != "" && info.Bundle != res.Name {
		return engine.Image{}, usagef("rebuild it with `sealbench image --bundle "+bundleDir+variantFlag(variant)+"`", "the Sandbox image in %s was built from %s, not %s", dir, info.Bundle, res.Name)
	}
	if err := info.ID.Validate(); err != nil {
		return engine.Image{}, usagef("rebuild it with `sealbench image --bundle "+bundleDir+variantFlag(variant)+"`", "%s: image id: %v", filepath.Join(dir, vmimages.SandboxInfo), err)
	}
	return imageOf(dir, &info, logf)
}

// variantFlag is the `sealbench image` flag that builds variant: none
// for the default.
func variantFlag(variant string) string {
	if variant == "" || variant == vmimages.VariantSandbox {
		return ""
	}
	return " --variant " + variant
}

// imageOf is the image a run loads, with the package lock it was built from
// (read from beside it, for the pins), and says so loudly when that lock
// is a fresh one standing in for the committed lock.
func imageOf(dir string, info *vmimages.ImageInfo, logf func(string, ...any)) (engine.Image, error) {
	img := engine.Image{Tar: filepath.Join(dir, vmimages.SandboxTar), Ref: info.Ref, ID: info.ID}
	b, err := os.ReadFile(filepath.Join(dir, vmimages.SandboxLock))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Images built before the lock was kept beside them.
	case err != nil:
		return engine.Image{}, fmt.Errorf("reading the Sandbox image's lock: %w", err)
	default:
		if got := manifests.DigestOf(b); !info.LockDigest.IsZero() && got != info.LockDigest {
			return engine.Image{}, fmt.Errorf("%s has digest %s, but the image records lock %s: rebuild the image", filepath.Join(dir, vmimages.SandboxLock), got, info.LockDigest)
		}
		if img.Lock, err = manifests.ParsePackageLock(b); err != nil {
			return engine.Image{}, fmt.Errorf("the Sandbox image's lock: %w", err)
		}
	}
	if r := info.Relock; r != nil {
		img.Relocked = fmt.Sprintf("built from a fresh lock (%s) because %s of the committed lock %s are in no source; the image id differs from the committed one",
			r.Fresh.Short(12), strings.Join(r.Missing, ", "), r.Committed.Short(12))
		logf("%s", r.Notice("Sandbox image"))
	}
	return img, nil
}
