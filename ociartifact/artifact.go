package ociartifact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/manifests"
)

// Media types and annotations of what Push writes.
const (
	// ArtifactType is a sealed bundle's.
	ArtifactType = "application/vnd.sealbench.bundle.v1"
	// FileMediaType is a layer holding one file of the bundle, its bytes
	// as they are (so its digest is the manifest's SHA-256 for the file).
	FileMediaType = "application/vnd.sealbench.bundle.file.v1"
	// LockMediaType is the layer holding the Sandbox image's package lock.
	LockMediaType = "application/vnd.sealbench.image.lock.v1+json"
	// SignatureType is the referrer holding manifest.sig (artifact and layer).
	SignatureType = "application/vnd.sealbench.bundle.signature.v1"
	// SigstoreBundleType is the referrer holding <bundle>.sigstore.json,
	// as cosign attaches Sigstore bundles (artifact and layer).
	SigstoreBundleType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// EmptyMediaType is OCI 1.1's empty config, the two bytes {}.
	EmptyMediaType = "application/vnd.oci.empty.v1+json"

	AnnotationTitle    = "org.opencontainers.image.title"
	AnnotationBundle   = "dev.sealbench.bundle"          // build-linux-<hash>
	AnnotationManifest = "dev.sealbench.bundle.manifest" // digest of manifest.json
	AnnotationImage    = "dev.sealbench.image"           // the Sandbox image's manifest digest, same repository
	AnnotationImageID  = "dev.sealbench.image.id"        // its config digest (the image id)
)

var emptyConfig = []byte("{}")

// manifest is an OCI image manifest with the OCI 1.1 fields
// go-containerregistry's v1.Manifest has no room for in the order the
// spec lists them.
type manifest struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Subject       *v1.Descriptor    `json:"subject,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// blob is one layer's content: bytes in memory, or a file read through a
// verifying reader (the bytes pushed are the bytes that were hashed).
type blob struct {
	desc v1.Descriptor
	data []byte // nil: read path
	path string
}

func memBlob(mt types.MediaType, data []byte, ann map[string]string) blob {
	h, n, _ := v1.SHA256(bytes.NewReader(data))
	return blob{desc: v1.Descriptor{MediaType: mt, Digest: h, Size: n, Annotations: ann}, data: data}
}

func fileBlob(path string, size int64, d manifests.Digest, ann map[string]string) blob {
	return blob{desc: v1.Descriptor{MediaType: FileMediaType, Digest: v1.Hash{Algorithm: d.Algorithm, Hex: d.Hex}, Size: size, Annotations: ann}, path: path}
}

func (b blob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b blob) Size() (int64, error)                { return b.desc.Size, nil }
func (b blob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b blob) Compressed() (io.ReadCloser, error) {
	if b.data != nil {
		return io.NopCloser(bytes.NewReader(b.data)), nil
	}
	f, err := os.Open(b.path)
	if err != nil {
		return nil, err
	}
	want := manifests.Digest{Algorithm: b.desc.Digest.Algorithm, Hex: b.desc.Digest.Hex}
	return struct {
		io.Reader
		io.Closer
	}{manifests.NewVerifyingReader(f, b.desc.Size, want), f}, nil
}

// artifact is an OCI manifest with its blobs, as go-containerregistry's
// remote.Write takes an image.
type artifact struct {
	raw   []byte
	blobs map[v1.Hash]blob
}

var _ partial.CompressedImageCore = (*artifact)(nil)

// newArtifact makes the artifact of artifactType with layers, a referrer
// of subject when that is not nil: the image remote.Write takes, and its
// descriptor (a referrer's subject, the digest a push names).
func newArtifact(artifactType string, layers []blob, subject *v1.Descriptor, ann map[string]string) (v1.Image, v1.Descriptor, error) {
	cfg := memBlob(EmptyMediaType, emptyConfig, nil)
	m := manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: artifactType,
		Config: cfg.desc, Layers: []v1.Descriptor{}, Subject: subject, Annotations: ann,
	}
	a := &artifact{blobs: map[v1.Hash]blob{cfg.desc.Digest: cfg}}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.desc)
		a.blobs[l.desc.Digest] = l
	}
	var err error
	if a.raw, err = json.Marshal(m); err != nil {
		return nil, v1.Descriptor{}, err
	}
	img, err := partial.CompressedToImage(a)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	return img, a.descriptor(), nil
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.raw, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	b, ok := a.blobs[h]
	if !ok {
		return nil, fmt.Errorf("no blob %s in the artifact", h)
	}
	return b, nil
}

// descriptor is the artifact's own descriptor, as a referrer's subject.
func (a *artifact) descriptor() v1.Descriptor {
	h, n, _ := v1.SHA256(bytes.NewReader(a.raw))
	return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: n}
}
