// Package ocitest holds what tests of bundles in registries share: the
// edit an attacker with write access to a registry can make.
package ocitest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/ociartifact"
)

// EditLayer pushes the bundle artifact at from again, as to, with the
// layer titled title holding data instead: a new blob and a manifest
// rewritten to match, so that every digest the registry checks agrees
// and only the bundle's key can tell.
func EditLayer(t testing.TB, from name.Reference, title string, data []byte, to name.Reference) {
	t.Helper()
	desc, err := remote.Get(from)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	l := static.NewLayer(data, ociartifact.FileMediaType)
	if err := remote.WriteLayer(from.Context(), l); err != nil {
		t.Fatal(err)
	}
	d, _ := l.Digest()
	found := false
	for _, x := range m["layers"].([]any) {
		layer := x.(map[string]any)
		if ann, _ := layer["annotations"].(map[string]any); ann[ociartifact.AnnotationTitle] == title {
			layer["digest"], layer["size"], found = d.String(), len(data), true
		}
	}
	if !found {
		t.Fatalf("%s has no layer %s", from, title)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(to, rawManifest(raw)); err != nil {
		t.Fatal(err)
	}
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
