package orchestrate

import (
	"errors"
	"testing"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
)

// TestCheckPulledImage: the Sandbox image a pulled artifact names (an
// unsigned annotation) is taken only when the signed provenance names the
// same image id; another is a content problem; with no provenance, or no
// image in it, nothing is taken from the registry.
func TestCheckPulledImage(t *testing.T) {
	id := manifests.DigestOf([]byte("config"))
	other := manifests.DigestOf([]byte("another config"))
	att := &BundleAttestation{SealCheck: attest.SealCheck{Image: &attest.ImageSubject{Ref: "sealbench/sandbox:build-linux-0123456789ab", Config: id}}}
	pulled := func(imageID string) *ociartifact.Pulled {
		return &ociartifact.Pulled{Reference: "oci://localhost:5000/b@sha256:00", Image: "oci://localhost:5000/b@" + imageID, ImageID: imageID}
	}
	if ok, err := CheckPulledImage(pulled(id.String()), att); !ok || err != nil {
		t.Errorf("the attested image: %v, %v", ok, err)
	}
	var ce *bundle.ContentError
	if ok, err := CheckPulledImage(pulled(other.String()), att); ok || !errors.As(err, &ce) {
		t.Errorf("another image: %v, %v", ok, err)
	}
	if ok, err := CheckPulledImage(pulled(id.String()), nil); ok || err != nil {
		t.Errorf("no provenance: %v, %v", ok, err)
	}
	if ok, err := CheckPulledImage(pulled(id.String()), &BundleAttestation{}); ok || err != nil {
		t.Errorf("a provenance naming no image: %v, %v", ok, err)
	}
}
