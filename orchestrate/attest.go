package orchestrate

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/vmimages"
)

// AttestationPath is where a bundle's Sigstore bundle lies: beside the
// bundle directory and its tar, as <name>.sigstore.json, never inside the
// bundle (whose bytes must not depend on when it was sealed).
func AttestationPath(bundlePath string) string {
	p := strings.TrimSuffix(filepath.Clean(bundlePath), ".tar")
	return p + sign.AttestationSuffix
}

// AttestSeal signs the SLSA provenance of a sealed bundle (and of its
// Sandbox image, when img is not nil) into <bundle>.sigstore.json, and
// returns that path. start and end are the seal's.
func AttestSeal(res *bundle.SealResult, img *vmimages.ImageInfo, signer *sign.Signer, start, end time.Time) (string, error) {
	meta := map[string]manifests.Digest{
		manifests.ManifestFile:  res.ManifestDigest,
		manifests.SumsFile:      manifests.DigestOf(res.Manifest.SHA256SUMS()),
		manifests.SignatureFile: manifests.DigestOf(res.Signature),
	}
	s := attest.Sealed{
		Name: res.Name, Manifest: res.Manifest, Meta: meta, Tar: res.TarDigest,
		Version: version.Version, Start: start, End: end,
	}
	if img != nil {
		s.Image = &attest.Image{Ref: img.Ref, Config: img.ID, Arch: img.Arch,
			Lock: "vmimages/locks/sandbox-" + img.Arch + ".json", LockDigest: img.LockDigest}
		if img.Relock != nil {
			s.Image.Lock, s.Image.Relocked = filepath.Base(img.Lock), img.Relock.Reason
		}
	}
	st, err := attest.SealStatement(s)
	if err != nil {
		return "", err
	}
	out, err := signer.SignStatement(st)
	if err != nil {
		return "", err
	}
	p := AttestationPath(res.Dir)
	if err := atomicfile.WriteFile(p, out, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	return p, nil
}

// BundleAttestation is what VerifyAttestation found.
type BundleAttestation struct {
	Path          string `json:"path"`
	PredicateType string `json:"predicateType"`
	attest.SealCheck
}

// ErrNoAttestation: the bundle has no <bundle>.sigstore.json beside it.
var ErrNoAttestation = errors.New("no Sigstore bundle")

// VerifyAttestation checks the Sigstore bundle beside a verified bundle
// (bundlePath, its directory or its tar): the signature with v first, then
// every subject: the bundle's files against the verified manifest (and the
// manifest's own files against their bytes), the tar against its bytes
// when it is at hand. It returns ErrNoAttestation when there is none, an
// error wrapping bundle.ErrSignature when it does not verify, and a
// *bundle.ContentError listing every subject that differs.
func VerifyAttestation(bundlePath string, res *bundle.VerifyResult, v *sign.Verifier) (*BundleAttestation, error) {
	p := AttestationPath(bundlePath)
	b, err := sign.ReadAttestation(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoAttestation
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", bundle.ErrSignature, p, err)
	}
	st, err := v.VerifyAttestation(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", bundle.ErrSignature, p, err)
	}
	meta := metaDigests(res)
	var tar *manifests.Digest
	tarPath := strings.TrimSuffix(filepath.Clean(bundlePath), ".tar") + ".tar"
	if _, d, err := manifests.HashFile(tarPath); err == nil {
		tar = &d
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("hashing %s: %w", tarPath, err)
	}
	c := attest.CheckSeal(st, res.Name, attest.BundleFiles(res.Manifest, meta), tar)
	out := &BundleAttestation{Path: p, PredicateType: st.GetPredicateType(), SealCheck: c}
	if len(c.Problems) > 0 {
		ce := &bundle.ContentError{Bundle: p}
		for _, pr := range c.Problems {
			ce.Problems = append(ce.Problems, bundle.Problem{Path: pr.Subject, Kind: "attestation", Detail: pr.Detail})
		}
		return out, ce
	}
	return out, nil
}

// metaDigests are the digests of a verified bundle's manifest.json,
// manifest.sig and SHA256SUMS, as verification read them: the manifest's
// is the verified one, the sums are what verification required, and
// manifest.sig the bytes that verified.
func metaDigests(res *bundle.VerifyResult) map[string]manifests.Digest {
	return map[string]manifests.Digest{
		manifests.ManifestFile:  res.ManifestDigest,
		manifests.SumsFile:      manifests.DigestOf(res.Manifest.SHA256SUMS()),
		manifests.SignatureFile: manifests.DigestOf(res.Signature),
	}
}
