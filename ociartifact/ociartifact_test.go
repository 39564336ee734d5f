package ociartifact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/ociartifact/ocitest"
)

var source = manifests.BundleSource{
	Module:     bundle.Module,
	Version:    "0.1.0+g0123456789ab",
	Commit:     "0123456789abcdef0123456789abcdef01234567",
	Time:       time.Unix(1700000000, 0).UTC(),
	GoVersion:  "go1.26.8",
	BuildFlags: []string{"-trimpath"},
	BuildEnv:   []string{"CGO_ENABLED=0"},
	Platforms:  []string{"linux/amd64", "linux/arm64"},
}

type testBundle struct {
	res      *bundle.SealResult
	verifier *sign.Verifier
}

// smallBundle assembles and signs a small bundle through the code Seal
// uses after its builds: seconds, not a build of every part.
func smallBundle(t *testing.T, files map[string]string) testBundle {
	t.Helper()
	keys := t.TempDir()
	priv, pub, err := sign.WriteKeyPair(keys, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadPrivateKey(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	staged := filepath.Join(out, ".seal-staged")
	for p, data := range files {
		full := filepath.Join(staged, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res, err := bundle.Assemble(staged, out, source, s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return testBundle{res, v}
}

var files = map[string]string{
	"bin/linux-amd64/sealbench": "amd64 binary\x7fELF" + strings.Repeat("a", 300<<10),
	"cells/C01.sh":              "echo one\n",
	"cells/C02.sh":              "echo two\n",
}

func toPush(b testBundle) ociartifact.Bundle {
	return ociartifact.Bundle{Dir: b.res.Dir, Name: b.res.Name, Manifest: b.res.Manifest, ManifestDigest: b.res.ManifestDigest,
		Signature: b.res.Signature, Attestation: []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)}
}

func ref(t *testing.T, s string) ociartifact.Ref {
	t.Helper()
	r, err := ociartifact.ParseRef(s, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPushPullVerify: a bundle pushed to a real registry (distribution
// 2.8) comes back, by its tag, as a directory that verifies with the key,
// with its Sigstore bundle found through the referrers tag schema; the
// layers are the manifest's files, addressed by the manifest's own
// digests; pushing it again gives the same digest; and a second pull is
// served from the cache.
func TestPushPullVerify(t *testing.T) {
	reg := testenv.Registry(t)
	ctx := context.Background()
	b := smallBundle(t, files)
	r := ref(t, "oci://"+reg+"/bench/bundle:v1")
	o := ociartifact.Options{Log: t.Logf}
	pushed, err := ociartifact.Push(ctx, r, toPush(b), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed.Referrers) != 2 || pushed.Layers != len(b.res.Manifest.Files)+3 {
		t.Errorf("pushed: %+v", pushed)
	}
	again, err := ociartifact.Push(ctx, r, toPush(b), o)
	if err != nil || again.Digest != pushed.Digest {
		t.Errorf("pushing the same bundle again: %v, digest %s then %s", err, pushed.Digest, again.Digest)
	}

	// The artifact as any registry client sees it.
	desc, err := remote.Get(r.Reference)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ArtifactType string
		Config       v1.Descriptor
		Layers       []v1.Descriptor
	}
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != pushed.Digest || m.ArtifactType != ociartifact.ArtifactType || m.Config.MediaType != ociartifact.EmptyMediaType {
		t.Errorf("artifact %s: %s", desc.Digest, desc.Manifest)
	}
	for _, l := range m.Layers {
		f, ok := b.res.Manifest.File(l.Annotations[ociartifact.AnnotationTitle])
		if ok && (f.Digest.Hex != l.Digest.Hex || f.Size != l.Size) {
			t.Errorf("layer %s is %s, the manifest says %s", f.Path, l.Digest, f.Digest)
		}
	}
	refs, err := remote.Referrers(r.Context().Digest(pushed.Digest))
	if err != nil {
		t.Fatal(err)
	}
	if im, _ := refs.IndexManifest(); im == nil || len(im.Manifests) != 2 {
		t.Errorf("referrers (tag schema): %+v", im)
	}
	if _, err := remote.Head(r.Context().Tag("sha256-" + strings.TrimPrefix(pushed.Digest, "sha256:"))); err != nil {
		t.Errorf("no referrers tag schema index: %v", err)
	}

	cache := t.TempDir()
	// A pull that was killed left its staging directory: this one
	// removes it, and leaves none of its own.
	killed := filepath.Join(cache, ".sealbench-pull-0123456789ab")
	os.MkdirAll(filepath.Join(killed, "files"), 0o755)
	p, err := ociartifact.Pull(ctx, r, cache, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != pushed.Digest || p.Cached || p.Attestation == "" || filepath.Base(p.Dir) != b.res.Name {
		t.Errorf("pulled: %+v", p)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".sealbench-*")); len(left) != 0 {
		t.Errorf("staging directories left in the cache: %v", left)
	}
	res, err := bundle.VerifyDir(ctx, p.Dir, bundle.VerifyOptions{Verifier: b.verifier, Expect: b.res.Name})
	if err != nil {
		t.Fatalf("the pulled bundle does not verify: %v", err)
	}
	if res.ManifestDigest != b.res.ManifestDigest {
		t.Errorf("pulled manifest %s, pushed %s", res.ManifestDigest, b.res.ManifestDigest)
	}
	if att, _ := os.ReadFile(p.Attestation); !bytes.Equal(att, toPush(b).Attestation) {
		t.Errorf("attestation pulled: %q", att)
	}
	p2, err := ociartifact.Pull(ctx, ref(t, pushed.Reference), cache, o)
	if err != nil || !p2.Cached || p2.Dir != p.Dir {
		t.Errorf("second pull, by digest: %+v, %v", p2, err)
	}
}

// TestLayersDedupAcrossVersions is why a layer is a file: the next
// version of a bundle, with one binary changed, uploads that binary and
// the manifest's own three files, and not one byte of the cell bodies.
func TestLayersDedupAcrossVersions(t *testing.T) {
	reg := testenv.Registry(t)
	ctx := context.Background()
	var mu sync.Mutex
	var uploaded []string
	count := roundTripper(func(req *http.Request) (*http.Response, error) {
		if d := req.URL.Query().Get("digest"); req.Method == http.MethodPut && d != "" {
			mu.Lock()
			uploaded = append(uploaded, d)
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(req)
	})
	o := ociartifact.Options{Transport: count}
	v1files := maps.Clone(files)
	a := smallBundle(t, v1files)
	if _, err := ociartifact.Push(ctx, ref(t, "oci://"+reg+"/bench/bundle:v1"), toPush(a), o); err != nil {
		t.Fatal(err)
	}
	v2files := maps.Clone(files)
	v2files["bin/linux-amd64/sealbench"] += "v2"
	b := smallBundle(t, v2files)
	mu.Lock()
	uploaded = nil
	mu.Unlock()
	if _, err := ociartifact.Push(ctx, ref(t, "oci://"+reg+"/bench/bundle:v2"), toPush(b), o); err != nil {
		t.Fatal(err)
	}
	bin, _ := b.res.Manifest.File("bin/linux-amd64/sealbench")
	if !slices.Contains(uploaded, bin.Digest.String()) {
		t.Errorf("the changed binary %s was not uploaded: %v", bin.Digest, uploaded)
	}
	for _, p := range []string{"cells/C01.sh", "cells/C02.sh"} {
		f, _ := b.res.Manifest.File(p)
		if slices.Contains(uploaded, f.Digest.String()) {
			t.Errorf("%s, the same in both versions, was uploaded again", p)
		}
	}
}

// TestRegistryErrorsSayWhat: a reference that is not there says so, with
// the reference.
func TestRegistryErrorsSayWhat(t *testing.T) {
	reg := testenv.Registry(t)
	_, err := ociartifact.Pull(context.Background(), ref(t, "oci://"+reg+"/bench/nothing:v1"), t.TempDir(), ociartifact.Options{})
	if err == nil || !strings.Contains(err.Error(), "not found in the registry (404)") || !strings.Contains(err.Error(), "bench/nothing:v1") {
		t.Errorf("pulling what is not there: %v", err)
	}
}

// TestTamperedArtifactIsRefused: whoever controls the registry can push
// an edited bundle (a layer changed, its manifest rewritten to match)
// under another tag: the digests all agree, so only the key can tell, and
// verification refuses the bundle, naming the file.
func TestTamperedArtifactIsRefused(t *testing.T) {
	reg := testenv.Registry(t)
	ctx := context.Background()
	b := smallBundle(t, files)
	r := ref(t, "oci://"+reg+"/bench/bundle:v1")
	if _, err := ociartifact.Push(ctx, r, toPush(b), ociartifact.Options{}); err != nil {
		t.Fatal(err)
	}
	// The edit: cells/C01.sh says something else, in a new layer.
	edited := []byte("echo pwned\n")
	ocitest.EditLayer(t, r.Reference, "cells/C01.sh", edited, ref(t, "oci://"+reg+"/bench/bundle:edited").Reference)
	p, err := ociartifact.Pull(ctx, ref(t, "oci://"+reg+"/bench/bundle:edited"), t.TempDir(), ociartifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bundle.VerifyDir(ctx, p.Dir, bundle.VerifyOptions{Verifier: b.verifier})
	var ce *bundle.ContentError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cells/C01.sh") {
		t.Fatalf("verify of the edited bundle: %v", err)
	}
}

// TestPlainHTTPOnlyOnLoopback: go-containerregistry would fall back to
// plain HTTP for a private address; sealbench refuses unless asked.
func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	for _, insecure := range []bool{false, true} {
		var schemes []string
		rt := roundTripper(func(req *http.Request) (*http.Response, error) {
			schemes = append(schemes, req.URL.Scheme)
			return nil, errors.New("no registry here")
		})
		r, err := ociartifact.ParseRef("oci://10.0.0.1:5000/bench/bundle:v1", insecure)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ociartifact.Pull(context.Background(), r, t.TempDir(), ociartifact.Options{Transport: rt}); err == nil {
			t.Fatal("pulled from nowhere")
		}
		if plain := slices.Contains(schemes, "http"); plain != insecure {
			t.Errorf("insecure %v: requests went out as %v", insecure, schemes)
		}
	}
	for _, bad := range []string{"oci://bench/bundle:v1", "docker://localhost:5000/a", "oci://localhost:5000", "oci://localhost:5000/"} {
		if _, err := ociartifact.ParseRef(bad, false); err == nil {
			t.Errorf("ParseRef(%q) took it", bad)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
