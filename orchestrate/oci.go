package orchestrate

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/internal/toolcache"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/vmimages"
)

// BundleCacheDir is where bundles pulled from registries are kept, one
// directory per artifact digest: ~/.cache/sealbench/bundles/sha256-<hex>.
func BundleCacheDir() string { return filepath.Join(toolcache.Dir(), "bundles") }

// PushOptions says which bundle to publish, where.
type PushOptions struct {
	Bundle   string // the bundle directory or its tar
	Ref      string // oci://REGISTRY/REPO[:TAG]
	Insecure bool   // plain HTTP to a registry not on loopback
	Key      string // the public key the bundle must verify with first
	Log      func(string, ...any)
}

// PushBundle verifies the bundle (and the Sigstore bundle beside it) with
// the key, then publishes it with its Sandbox image, when one is beside
// it: nothing that does not verify is published.
func PushBundle(ctx context.Context, o PushOptions) (*ociartifact.Pushed, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r, err := ociartifact.ParseRef(o.Ref, o.Insecure)
	if err != nil {
		return nil, usagef("oci://REGISTRY/REPOSITORY:TAG, e.g. oci://localhost:5000/bench/bundle:v1", "%v", err)
	}
	v, err := LoadVerifier(o.Key)
	if err != nil {
		return nil, err
	}
	dir := o.Bundle
	if fi, err := os.Stat(dir); err == nil && fi.Mode().IsRegular() {
		// A tar: verified, then extracted, then verified again as a directory.
		res, err := bundle.VerifyTar(ctx, dir, bundle.VerifyOptions{Verifier: v})
		if err != nil {
			return nil, err
		}
		// Extracted into a staging directory that the next push
		// removes if this one is killed (scratch).
		scratch.Sweep(os.TempDir())
		sd, err := scratch.Make(os.TempDir(), "push")
		if err != nil {
			return nil, err
		}
		defer sd.Remove()
		if dir, err = extractVerifiedTar(o.Bundle, res, sd.Path); err != nil {
			return nil, err
		}
	}
	res, err := bundle.VerifyDir(ctx, dir, bundle.VerifyOptions{Verifier: v})
	if err != nil {
		return nil, err
	}
	logf("verified %s (key %s)", res.Name, v.KeyID())
	b := ociartifact.Bundle{Dir: dir, Name: res.Name, Manifest: res.Manifest, ManifestDigest: res.ManifestDigest, Signature: res.Signature}
	switch att, err := VerifyAttestation(o.Bundle, res, v); {
	case errors.Is(err, ErrNoAttestation):
		logf("no %s beside the bundle: pushing it with manifest.sig alone", filepath.Base(AttestationPath(o.Bundle)))
	case err != nil:
		return nil, err
	default:
		if b.Attestation, err = os.ReadFile(att.Path); err != nil {
			return nil, err
		}
	}
	imageDir := strings.TrimSuffix(filepath.Clean(o.Bundle), ".tar") + ".image"
	if b.Image, b.Lock, err = localSandboxImage(imageDir, res.Name); err != nil {
		return nil, err
	}
	if b.Image == nil {
		logf("no Sandbox image in %s: pushing the bundle alone (a run from it builds the image)", imageDir)
	}
	return ociartifact.Push(ctx, r, b, ociartifact.Options{Log: logf})
}

// localSandboxImage is the Sandbox image in dir (<bundle>.image, as seal
// writes it) and its lock; nil when there is none.
func localSandboxImage(dir, bundleName string) (v1.Image, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, vmimages.SandboxInfo))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var info vmimages.ImageInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, vmimages.SandboxInfo), err)
	}
	if info.Bundle != bundleName {
		return nil, nil, usagef("rebuild it with `sealbench image --bundle DIR`", "the Sandbox image in %s was built from %s, not %s", dir, info.Bundle, bundleName)
	}
	lock, err := os.ReadFile(filepath.Join(dir, vmimages.SandboxLock))
	if err != nil {
		return nil, nil, fmt.Errorf("the Sandbox image's lock: %w", err)
	}
	p, err := layout.FromPath(filepath.Join(dir, vmimages.SandboxLayout))
	if err != nil {
		return nil, nil, fmt.Errorf("the Sandbox image's OCI layout: %w", err)
	}
	img, err := p.Image(v1.Hash{Algorithm: info.ManifestDigest.Algorithm, Hex: info.ManifestDigest.Hex})
	if err != nil {
		return nil, nil, fmt.Errorf("the Sandbox image %s in %s: %w", info.ManifestDigest, dir, err)
	}
	if id, err := img.ConfigName(); err != nil || id.Hex != info.ID.Hex {
		return nil, nil, fmt.Errorf("the Sandbox image in %s has id %s, its %s says %s", dir, id, vmimages.SandboxInfo, info.ID)
	}
	return img, lock, nil
}

// extractVerifiedTar writes the files of a verified bundle tar into
// under/<name>: only the regular files the manifest lists (and its own
// three), each with the manifest's mode. The directory is verified again
// after, so a tar changed since its verification is caught there.
func extractVerifiedTar(tarPath string, res *bundle.VerifyResult, under string) (string, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	dir := filepath.Join(under, res.Name)
	modes := map[string]fs.FileMode{manifests.ManifestFile: 0o644, manifests.SignatureFile: 0o644, manifests.SumsFile: 0o644}
	for _, bf := range res.Manifest.Files {
		modes[bf.Path] = fs.FileMode(bf.Mode)
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir, nil
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", tarPath, err)
		}
		_, rel, ok := strings.Cut(h.Name, "/")
		mode, listed := modes[rel]
		if h.Typeflag != tar.TypeReg || !ok || !listed {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
		if err != nil {
			return "", err
		}
		_, err = io.Copy(out, io.LimitReader(tr, h.Size))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(dst, mode.Perm())
		}
		if err != nil {
			return "", fmt.Errorf("extracting %s: %w", rel, err)
		}
	}
}

// PullBundle fetches the bundle at ref (oci://...) into the bundle cache,
// resolving a tag once; the caller verifies p.Dir as any bundle.
func PullBundle(ctx context.Context, ref string, insecure bool, logf func(string, ...any)) (*ociartifact.Pulled, error) {
	r, err := ociartifact.ParseRef(ref, insecure)
	if err != nil {
		return nil, usagef("oci://REGISTRY/REPOSITORY[:TAG|@DIGEST], e.g. oci://localhost:5000/bench/bundle:v1", "%v", err)
	}
	return ociartifact.Pull(ctx, r, BundleCacheDir(), ociartifact.Options{Log: logf})
}

// CheckPulledImage compares the Sandbox image a pulled artifact names
// with the one its verified provenance names (att; nil when none was
// attached). An artifact naming another image is a content problem: the
// registry's annotations are not the signed provenance.
func CheckPulledImage(p *ociartifact.Pulled, att *BundleAttestation) (bool, error) {
	if p.ImageID == "" || att == nil || att.Image == nil {
		return false, nil
	}
	if att.Image.Config.String() != p.ImageID {
		return false, &bundle.ContentError{Bundle: p.Reference, Problems: []bundle.Problem{{
			Path: ociartifact.AnnotationImageID, Kind: "attestation",
			Detail: fmt.Sprintf("the artifact names Sandbox image %s, the signed provenance %s", p.ImageID, att.Image.Config),
		}}}
	}
	return true, nil
}

// pulledSandboxImage writes the Sandbox image a pulled, verified bundle
// names beside it in the cache (<bundle>.image), when its signed
// provenance names that image: otherwise nothing is taken from the
// registry, and the image is built here from the verified bundle.
func pulledSandboxImage(ctx context.Context, p *ociartifact.Pulled, res *bundle.VerifyResult, attested bool, logf func(string, ...any)) error {
	dir := filepath.Clean(p.Dir) + ".image"
	if _, err := os.Stat(filepath.Join(dir, vmimages.SandboxInfo)); err == nil || p.Image == "" {
		return nil
	}
	if !attested {
		logf("the Sandbox image %s is not named by a signed provenance: building it here from the verified bundle", p.Image)
		return nil
	}
	r, err := ociartifact.ParseRef(p.Image, false)
	if err != nil {
		return err
	}
	logf("pulling the Sandbox image %s", p.Image)
	img, err := p.SandboxImage(ctx, ociartifact.Options{Log: logf})
	if err != nil {
		return err
	}
	if id, err := img.ConfigName(); err != nil || id.String() != p.ImageID {
		return fmt.Errorf("the Sandbox image %s has id %v, the artifact names %s: %v", r, id, p.ImageID, err)
	}
	if _, err := vmimages.WriteSandbox(img, dir, res.Name, p.Lock); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("writing the Sandbox image %s into %s: %w", p.Image, dir, err)
	}
	return nil
}

// ResultsCacheDir is where run results pulled from registries are kept,
// one directory per artifact digest.
func ResultsCacheDir() string { return filepath.Join(toolcache.Dir(), "results") }

// resultsReports are the reports a run writes beside its results, which
// PushResults publishes with them when they are there.
var resultsReports = []string{"report.md", "report.html", "report.json", "report.csv"}

// PushResults publishes the run directory dir at ref: samples.jsonl and
// pins.json (read and checked as report reads them), the reports beside
// them, and results.sigstore.json, when the run was signed, attached as a
// referrer. Whoever reads them checks the signature: report oci://...
// --require-signed --key PUB.
func PushResults(ctx context.Context, dir, ref string, insecure bool, logf func(string, ...any)) (*ociartifact.Pushed, error) {
	r, err := ociartifact.ParseRef(ref, insecure)
	if err != nil {
		return nil, usagef("oci://REGISTRY/REPOSITORY:TAG, e.g. oci://localhost:5000/bench/results:run-1", "%v", err)
	}
	res := ociartifact.Results{Files: map[string][]byte{}, AttestationName: attest.ResultsFile}
	for _, n := range append([]string{manifests.SamplesFile, manifests.PinsFile}, resultsReports...) {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) && n != manifests.SamplesFile && n != manifests.PinsFile {
			continue
		}
		if err != nil {
			return nil, usagef("--results takes a run directory (samples.jsonl and pins.json), e.g. out/runs/<run id>", "reading the results: %v", err)
		}
		res.Files[n] = b
	}
	pins, err := manifests.ReadRunPins(bytes.NewReader(res.Files[manifests.PinsFile]))
	if err != nil {
		return nil, usagef("", "%s: %v", filepath.Join(dir, manifests.PinsFile), err)
	}
	if _, err := manifests.ReadSamples(bytes.NewReader(res.Files[manifests.SamplesFile])); err != nil {
		return nil, usagef("", "%s: %v", filepath.Join(dir, manifests.SamplesFile), err)
	}
	res.RunID, res.BundleID = pins.RunID, pins.BundleID
	switch b, err := os.ReadFile(filepath.Join(dir, attest.ResultsFile)); {
	case errors.Is(err, fs.ErrNotExist):
		logf("no %s in %s: the run was not signed, so the results are pushed unsigned", attest.ResultsFile, dir)
	case err != nil:
		return nil, err
	default:
		res.Attestation = b
	}
	return ociartifact.PushResults(ctx, r, res, ociartifact.Options{Log: logf})
}

// PullResults fetches the run results at ref into the results cache and
// returns the run directory there, for report to read as any other (its
// signature, when one is attached, in it as results.sigstore.json).
func PullResults(ctx context.Context, ref string, insecure bool, logf func(string, ...any)) (*ociartifact.PulledResults, error) {
	r, err := ociartifact.ParseRef(ref, insecure)
	if err != nil {
		return nil, usagef("oci://REGISTRY/REPOSITORY[:TAG|@DIGEST], as push --results printed it", "%v", err)
	}
	return ociartifact.PullResults(ctx, r, ResultsCacheDir(), attest.ResultsFile, ociartifact.Options{Log: logf})
}
