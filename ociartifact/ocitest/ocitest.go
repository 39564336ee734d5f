// Package ocitest holds what tests of bundles in registries share: the
// edit an attacker with write access to a registry can make.
package ocitest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/ociartifact"
)

// EditLayer pushes the bundle artifact at from again, as to, with the
// layer titled title holding data instead: a new blob and a manifest
// rewritten to match, so that every digest the registry checks agrees
// and only the bundle's key can tell. It returns the edited artifact's
// descriptor (to attach the original's signatures to, as a thorough
// attacker would).
func EditLayer(t testing.TB, from name.Reference, title string, data []byte, to name.Reference) v1.Descriptor {
	t.Helper()
	desc, err := remote.Get(from)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	var layer map[string]any
	for _, x := range m["layers"].([]any) {
		if l := x.(map[string]any); l["annotations"].(map[string]any)[ociartifact.AnnotationTitle] == title {
			layer = l
		}
	}
	if layer == nil {
		t.Fatalf("%s has no layer %s", from, title)
	}
	l := static.NewLayer(data, types.MediaType(layer["mediaType"].(string)))
	if err := remote.WriteLayer(from.Context(), l); err != nil {
		t.Fatal(err)
	}
	d, _ := l.Digest()
	layer["digest"], layer["size"] = d.String(), len(data)
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(to, rawManifest(raw)); err != nil {
		t.Fatal(err)
	}
	h, n, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: h, Size: n}
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
