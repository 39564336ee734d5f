package ociartifact

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/manifests"
)

// Bundle is a verified bundle, as Push publishes it: everything in it has
// been checked by the caller (bundle.Verify and, when there is one, the
// Sigstore bundle with the same key).
type Bundle struct {
	Dir            string // the bundle directory
	Name           string // build-linux-<hash>
	Manifest       *manifests.BundleManifest
	ManifestDigest manifests.Digest
	Signature      []byte // manifest.sig, as it verified
	// Attestation is <bundle>.sigstore.json; nil when there is none.
	Attestation []byte
	// Image is the Sandbox image and Lock the package lock it was built
	// from; nil when the bundle has none.
	Image v1.Image
	Lock  []byte
}

// Pushed is what Push published.
type Pushed struct {
	Ref       string `json:"ref"`       // as given
	Digest    string `json:"digest"`    // the artifact's manifest digest
	Reference string `json:"reference"` // oci://REGISTRY/REPO@DIGEST: what to pass on
	Bundle    string `json:"bundle"`
	Layers    int    `json:"layers"`
	Bytes     int64  `json:"bytes"` // of all layers, before the registry's dedup
	// Image is the Sandbox image, in the same repository by digest.
	Image     string     `json:"image,omitempty"`
	Referrers []Referrer `json:"referrers"`
}

// Referrer is a manifest attached to the artifact.
type Referrer struct {
	ArtifactType string `json:"artifactType"`
	Digest       string `json:"digest"`
}

// SandboxTag is the tag that keeps a bundle's Sandbox image from being
// collected as untagged: sha256-<hex of the artifact>.sandbox, in the
// style of cosign's sha256-<hex>.sig.
func SandboxTag(artifact v1.Hash) string { return artifact.Algorithm + "-" + artifact.Hex + ".sandbox" }

// Push publishes b at r (a tag; latest when none is given): the Sandbox
// image first, by digest, then the bundle's artifact naming it, then
// manifest.sig and the Sigstore bundle as referrers of the artifact.
// Pushing the same bundle again writes nothing new: every manifest is
// deterministic and every blob already there is skipped.
func Push(ctx context.Context, r Ref, b Bundle, o Options) (*Pushed, error) {
	if _, ok := r.Reference.(interface{ TagStr() string }); !ok {
		return nil, fmt.Errorf("push to a tag, not a digest: %s (the digest is the push's result)", r)
	}
	repo := r.Context()
	ann := map[string]string{
		AnnotationTitle:    b.Name,
		AnnotationBundle:   b.Name,
		AnnotationManifest: b.ManifestDigest.String(),
	}
	var layers []blob
	var total int64
	for _, f := range b.Manifest.Files {
		layers = append(layers, fileBlob(filepath.Join(b.Dir, filepath.FromSlash(f.Path)), f.Size, f.Digest, map[string]string{AnnotationTitle: f.Path}))
		total += f.Size
	}
	mb, err := os.ReadFile(filepath.Join(b.Dir, manifests.ManifestFile))
	if err != nil {
		return nil, err
	}
	if manifests.DigestOf(mb) != b.ManifestDigest {
		return nil, fmt.Errorf("%s changed after it was verified", filepath.Join(b.Dir, manifests.ManifestFile))
	}
	for _, m := range []struct {
		name string
		data []byte
	}{{manifests.ManifestFile, mb}, {manifests.SignatureFile, b.Signature}, {manifests.SumsFile, b.Manifest.SHA256SUMS()}} {
		layers = append(layers, memBlob(FileMediaType, m.data, map[string]string{AnnotationTitle: m.name}))
		total += int64(len(m.data))
	}
	out := &Pushed{Ref: r.String(), Bundle: b.Name, Referrers: []Referrer{}}
	if b.Image != nil {
		d, err := b.Image.Digest()
		if err != nil {
			return nil, err
		}
		id, err := b.Image.ConfigName()
		if err != nil {
			return nil, err
		}
		ir := r.Digest(d.String())
		o.logf("pushing the Sandbox image %s to %s", id, ir)
		if err := remote.Write(ir.Reference, b.Image, o.remote(r, remote.WithContext(ctx), o.progress("Sandbox image"))...); err != nil {
			return nil, explain("pushing the Sandbox image to", ir, err)
		}
		out.Image = ir.String()
		ann[AnnotationImage], ann[AnnotationImageID] = d.String(), id.String()
		layers = append(layers, memBlob(LockMediaType, b.Lock, map[string]string{AnnotationTitle: "sandbox-lock.json"}))
		total += int64(len(b.Lock))
	}
	img, desc, err := newArtifact(ArtifactType, layers, nil, ann)
	if err != nil {
		return nil, err
	}
	out.Digest, out.Layers, out.Bytes = desc.Digest.String(), len(layers), total
	out.Reference = r.Digest(out.Digest).String()
	o.logf("pushing %s (%d layers, %d bytes) to %s", b.Name, len(layers), total, r)
	if err := remote.Write(r.Reference, img, o.remote(r, remote.WithContext(ctx), o.progress(b.Name))...); err != nil {
		return nil, explain("pushing the bundle to", r, err)
	}
	if b.Image != nil {
		t := repo.Tag(SandboxTag(desc.Digest))
		if err := remote.Tag(t, b.Image, o.remote(r, remote.WithContext(ctx))...); err != nil {
			return nil, explain("tagging the Sandbox image as", Ref{Reference: t, Insecure: r.Insecure}, err)
		}
	}
	// The referrers: each a manifest whose subject is the artifact;
	// remote.Write keeps the referrers tag schema's index up to date
	// where the registry has no referrers API.
	refs := []struct {
		typ, title string
		data       []byte
	}{{SignatureType, manifests.SignatureFile, b.Signature}}
	if b.Attestation != nil {
		refs = append(refs, struct {
			typ, title string
			data       []byte
		}{SigstoreBundleType, b.Name + ".sigstore.json", b.Attestation})
	}
	for _, rf := range refs {
		ref, err := Attach(ctx, r, desc, rf.typ, rf.title, rf.data, map[string]string{AnnotationBundle: b.Name}, o)
		if err != nil {
			return nil, err
		}
		out.Referrers = append(out.Referrers, ref)
	}
	o.logf("pushed %s as %s", b.Name, out.Reference)
	return out, nil
}

// Attach pushes data into r's repository as a referrer of subject (OCI
// 1.1): a manifest of artifactType with data as its one layer, titled
// title; where the registry has no referrers API, the referrers tag
// schema's index (sha256-<hex of subject>) lists it too.
func Attach(ctx context.Context, r Ref, subject v1.Descriptor, artifactType, title string, data []byte, ann map[string]string, o Options) (Referrer, error) {
	l := memBlob(types.MediaType(artifactType), data, map[string]string{AnnotationTitle: title})
	img, desc, err := newArtifact(artifactType, []blob{l}, &subject, ann)
	if err != nil {
		return Referrer{}, err
	}
	rd := desc.Digest.String()
	rr := r.Digest(rd)
	if err := remote.Write(rr.Reference, img, o.remote(r, remote.WithContext(ctx))...); err != nil {
		return Referrer{}, explain("attaching "+title+" as", rr, err)
	}
	return Referrer{ArtifactType: artifactType, Digest: rd}, nil
}
