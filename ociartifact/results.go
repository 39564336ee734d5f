package ociartifact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
)

const (
	// ResultsType is a run's results' artifact type.
	ResultsType = "application/vnd.sealbench.results.v1"
	// ResultsFileMediaType is a layer holding one file of a run's results.
	ResultsFileMediaType = "application/vnd.sealbench.results.file.v1"
	// AnnotationRun is the run id of a results artifact.
	AnnotationRun = "dev.sealbench.run"
)

// Results is a run's results, as PushResults publishes them.
type Results struct {
	RunID, BundleID string
	// Files are the run directory's files to publish, by name:
	// samples.jsonl, pins.json and the reports.
	Files map[string][]byte
	// Attestation is results.sigstore.json, attached as a referrer; nil
	// when the run was not signed.
	Attestation []byte
	// AttestationName is its file name in the run directory.
	AttestationName string
}

// PushResults publishes a run's results at r: an artifact of type
// ResultsType, one layer per file, and the run's signature attached as a
// referrer (and in the referrers tag schema's index).
func PushResults(ctx context.Context, r Ref, res Results, o Options) (*Pushed, error) {
	if _, ok := r.Reference.(name.Tag); !ok {
		return nil, fmt.Errorf("push to a tag, not a digest: %s (the digest is the push's result)", r)
	}
	var layers []blob
	var total int64
	for _, n := range sortedKeys(res.Files) {
		if err := checkTitle(n); err != nil {
			return nil, err
		}
		layers = append(layers, memBlob(ResultsFileMediaType, res.Files[n], map[string]string{AnnotationTitle: n}))
		total += int64(len(res.Files[n]))
	}
	img, desc, err := newArtifact(ResultsType, layers, nil, map[string]string{
		AnnotationTitle: res.RunID, AnnotationRun: res.RunID, AnnotationBundle: res.BundleID,
	})
	if err != nil {
		return nil, err
	}
	out := &Pushed{Ref: r.String(), Digest: desc.Digest.String(), Reference: r.Digest(desc.Digest.String()).String(),
		Bundle: res.BundleID, Layers: len(layers), Bytes: total, Referrers: []Referrer{}}
	o.logf("pushing run %s (%d files, %d bytes) to %s", res.RunID, len(layers), total, r)
	if err := remote.Write(r.Reference, img, o.remote(r, remote.WithContext(ctx), o.progress("run "+res.RunID))...); err != nil {
		return nil, explain("pushing the results to", r, err)
	}
	if res.Attestation != nil {
		ref, err := Attach(ctx, r, desc, SigstoreBundleType, res.AttestationName, res.Attestation, map[string]string{AnnotationRun: res.RunID}, o)
		if err != nil {
			return nil, err
		}
		out.Referrers = append(out.Referrers, ref)
	}
	o.logf("pushed run %s as %s", res.RunID, out.Reference)
	return out, nil
}

// PulledResults is a run's results fetched into the cache: a run
// directory that report reads as any other, its signature (when one is
// attached) in it as the run wrote it.
type PulledResults struct {
	Ref       string `json:"ref"`
	Digest    string `json:"digest"`
	Reference string `json:"reference"`
	RunID     string `json:"runId"`
	Dir       string `json:"dir"`
	Cached    bool   `json:"cached"`
}

// PullResults resolves r once and lays the results artifact out in
// cacheDir/sha256-<hex>/<run id>/, with the Sigstore bundle attached to it
// written there as attestationName.
func PullResults(ctx context.Context, r Ref, cacheDir, attestationName string, o Options) (*PulledResults, error) {
	d, err := resolve(ctx, r, o)
	if err != nil {
		return nil, err
	}
	ref := r.Digest(d.String())
	p := &PulledResults{Ref: r.String(), Digest: d.String(), Reference: ref.String()}
	entry := filepath.Join(cacheDir, EntryName(d))
	if raw, err := os.ReadFile(filepath.Join(entry, entryManifest)); err == nil {
		if m, err := parseResults(raw, d); err == nil {
			p.RunID, p.Dir, p.Cached = m.Annotations[AnnotationRun], filepath.Join(entry, m.Annotations[AnnotationRun]), true
			return p, nil
		}
	}
	opts := o.remote(ref, remote.WithContext(ctx))
	desc, err := remote.Get(ref.Reference, opts...)
	if err != nil {
		return nil, explain("fetching", ref, err)
	}
	m, err := parseResults(desc.Manifest, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	p.RunID = m.Annotations[AnnotationRun]
	sd, err := stage(cacheDir)
	if err != nil {
		return nil, err
	}
	defer sd.Remove()
	tmp := sd.Path
	dir := filepath.Join(tmp, p.RunID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	f := fetcher{ref: ref}
	seen := map[string]bool{attestationName: true}
	for _, l := range m.Layers {
		title := l.Annotations[AnnotationTitle]
		if err := checkTitle(title); err != nil || l.MediaType != ResultsFileMediaType || seen[title] {
			return nil, fmt.Errorf("%s: layer %s (%q, %s) is not a results file, or is named twice", ref, l.Digest, title, l.MediaType)
		}
		seen[title] = true
		if err := f.writeFile(ctx, l, filepath.Join(dir, filepath.FromSlash(title)), 0o644, opts); err != nil {
			return nil, err
		}
	}
	if err := f.fetchAttestation(ctx, dir, attestationName, d, opts); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, entryManifest), desc.Manifest, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, entry); err != nil {
		if _, serr := os.Stat(filepath.Join(entry, entryManifest)); serr != nil {
			return nil, fmt.Errorf("moving the pulled results into the cache: %w", err)
		}
	}
	p.Dir = filepath.Join(entry, p.RunID)
	return p, atomicfile.SyncDir(cacheDir)
}

func parseResults(raw []byte, d v1.Hash) (*manifest, error) {
	if h, _, _ := v1.SHA256(bytes.NewReader(raw)); h != d {
		return nil, fmt.Errorf("the manifest is %s, not %s", h, d)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.MediaType != types.OCIManifestSchema1 || m.ArtifactType != ResultsType {
		return nil, fmt.Errorf("not a sealbench run's results: media type %q, artifact type %q (want %s)", m.MediaType, m.ArtifactType, ResultsType)
	}
	if err := manifests.ValidateRunID(m.Annotations[AnnotationRun]); err != nil {
		return nil, fmt.Errorf("the %s annotation: %w", AnnotationRun, err)
	}
	return &m, nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
