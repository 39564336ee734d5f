package ociartifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/manifests"
)

// Pulled is a bundle fetched from a registry into the cache. Nothing in
// it is trusted yet: the caller verifies Dir (and Attestation) with the
// key exactly as a local bundle.
type Pulled struct {
	Ref       string `json:"ref"`       // as given
	Digest    string `json:"digest"`    // the artifact's manifest digest, the tag resolved once
	Reference string `json:"reference"` // oci://REGISTRY/REPO@DIGEST
	Name      string `json:"bundle"`
	// Dir is the bundle directory in the cache, <cache>/sha256-<hex>/<name>.
	Dir string `json:"dir"`
	// Attestation is the Sigstore bundle attached to the artifact, written
	// beside Dir as <name>.sigstore.json; "" when none is attached.
	Attestation string `json:"attestation,omitempty"`
	// Image is the Sandbox image the artifact names, oci://...@DIGEST, and
	// ImageID its config digest; "" when it names none. Lock is the
	// package lock it was built from.
	Image   string `json:"image,omitempty"`
	ImageID string `json:"imageId,omitempty"`
	Lock    []byte `json:"-"`
	// Cached: the artifact was in the cache already; nothing but the tag
	// was asked of the registry.
	Cached bool `json:"cached"`

	ref Ref
}

// Files kept in a cache entry beside the bundle.
const (
	entryManifest = "artifact.json"     // the artifact's manifest, byte for byte
	entryLock     = "sandbox-lock.json" // the image's package lock layer
)

// maxSmallBlob bounds what is read into memory: a manifest.json, a lock, a
// Sigstore bundle, a manifest.
const maxSmallBlob = 16 << 20

// EntryName is the cache directory of an artifact digest: sha256-<hex>
// (no colon, which tools and docker -v read as a separator).
func EntryName(d v1.Hash) string { return d.Algorithm + "-" + d.Hex }

// Pull resolves r to a digest (once: a tag is asked for once, and the
// digest is what is fetched and recorded), then lays the artifact out in
// cacheDir/sha256-<hex>/: the bundle directory under its name, the
// Sigstore bundle attached to it beside it, and the image's lock. An
// artifact already in the cache is not fetched again.
func Pull(ctx context.Context, r Ref, cacheDir string, o Options) (*Pulled, error) {
	d, err := resolve(ctx, r, o)
	if err != nil {
		return nil, err
	}
	p := &Pulled{Ref: r.String(), Digest: d.String(), ref: r.Digest(d.String())}
	p.Reference = p.ref.String()
	if t, ok := r.Reference.(name.Tag); ok {
		o.logf("%s is %s", Scheme+t.Name(), d)
	}
	entry := filepath.Join(cacheDir, EntryName(d))
	if raw, err := os.ReadFile(filepath.Join(entry, entryManifest)); err == nil {
		if err := p.fill(raw, d, entry); err == nil {
			p.Cached = true
			o.logf("%s: in the cache at %s", p.Reference, entry)
			return p, nil
		}
		// A cache entry that does not read back is fetched again.
	}
	sd, err := stage(cacheDir)
	if err != nil {
		return nil, err
	}
	defer sd.Remove()
	tmp := sd.Path
	if err := p.fetch(ctx, tmp, d, o); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, entry); err != nil {
		// Another pull of the same digest got there first: use its.
		if _, serr := os.Stat(filepath.Join(entry, entryManifest)); serr != nil {
			return nil, fmt.Errorf("moving the pulled bundle into the cache: %w", err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(entry, entryManifest))
	if err != nil {
		return nil, err
	}
	if err := p.fill(raw, d, entry); err != nil {
		return nil, err
	}
	return p, atomicfile.SyncDir(cacheDir)
}

// stage makes the staging directory a pull fetches into, in the cache
// directory, so that the finished entry is one rename away; a pull that
// was killed left its own, which this removes (internal/scratch: a
// live pull's is never touched).
func stage(cacheDir string) (*scratch.Dir, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	scratch.Sweep(cacheDir) // what it cannot remove is no reason to stop
	return scratch.Make(cacheDir, "pull")
}

// resolve gives the digest r names: its own, or the tag's, asked once.
func resolve(ctx context.Context, r Ref, o Options) (v1.Hash, error) {
	if dr, ok := r.Reference.(name.Digest); ok {
		return v1.NewHash(dr.DigestStr())
	}
	desc, err := remote.Head(r.Reference, o.remote(r, remote.WithContext(ctx))...)
	if err != nil {
		return v1.Hash{}, explain("resolving", r, err)
	}
	return desc.Digest, nil
}

// parseArtifact reads an artifact's manifest and checks that it is a
// bundle's.
func parseArtifact(raw []byte) (*manifest, string, error) {
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, "", fmt.Errorf("parsing the artifact's manifest: %w", err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.ArtifactType != ArtifactType {
		return nil, "", fmt.Errorf("not a sealbench bundle: media type %q, artifact type %q (want %s)", m.MediaType, m.ArtifactType, ArtifactType)
	}
	name := m.Annotations[AnnotationBundle]
	if err := manifests.ValidateBundleID(name); err != nil {
		return nil, "", fmt.Errorf("the artifact's %s annotation: %w", AnnotationBundle, err)
	}
	return &m, name, nil
}

// fill describes the cache entry at entry, whose manifest is raw.
func (p *Pulled) fill(raw []byte, d v1.Hash, entry string) error {
	if h, _, _ := v1.SHA256(bytes.NewReader(raw)); h != d {
		return fmt.Errorf("%s is %s, not %s", filepath.Join(entry, entryManifest), h, d)
	}
	m, name, err := parseArtifact(raw)
	if err != nil {
		return err
	}
	p.Name, p.Dir = name, filepath.Join(entry, name)
	if _, err := os.Stat(p.Dir); err != nil {
		return err
	}
	if att := filepath.Join(entry, name+".sigstore.json"); fileExists(att) {
		p.Attestation = att
	}
	if img := m.Annotations[AnnotationImage]; img != "" {
		if _, err := v1.NewHash(img); err != nil {
			return fmt.Errorf("the artifact's %s annotation: %w", AnnotationImage, err)
		}
		p.Image, p.ImageID = p.ref.Digest(img).String(), m.Annotations[AnnotationImageID]
		if p.Lock, err = os.ReadFile(filepath.Join(entry, entryLock)); err != nil {
			return fmt.Errorf("the artifact names a Sandbox image but has no package lock layer: %w", err)
		}
	}
	return nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// fetch writes the artifact d into tmp.
func (p *Pulled) fetch(ctx context.Context, tmp string, d v1.Hash, o Options) error {
	opts := o.remote(p.ref, remote.WithContext(ctx))
	desc, err := remote.Get(p.ref.Reference, opts...)
	if err != nil {
		return explain("fetching", p.ref, err)
	}
	if desc.Digest != d {
		return fmt.Errorf("%s: the registry answered with %s", p.ref, desc.Digest)
	}
	m, name, err := parseArtifact(desc.Manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", p.ref, err)
	}
	o.logf("pulling %s (%s, %d layers) into the cache", p.Reference, name, len(m.Layers))
	f := fetcher{ref: p.ref}
	dir := filepath.Join(tmp, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	// The modes come from manifest.json, which verification then checks
	// with everything else: an unreadable one leaves 0644 everywhere,
	// and verification says what is wrong.
	modes := map[string]fs.FileMode{}
	seen := map[string]bool{}
	for _, l := range m.Layers {
		title := l.Annotations[AnnotationTitle]
		if title == manifests.ManifestFile && l.MediaType == FileMediaType {
			b, err := f.blob(ctx, l, maxSmallBlob, opts)
			if err != nil {
				return err
			}
			if bm, err := manifests.ParseBundleManifest(b); err == nil {
				for _, f := range bm.Files {
					modes[f.Path] = fs.FileMode(f.Mode)
				}
			}
			break
		}
	}
	for _, l := range m.Layers {
		title := l.Annotations[AnnotationTitle]
		switch l.MediaType {
		case FileMediaType:
			if err := checkTitle(title); err != nil {
				return fmt.Errorf("%s: layer %s: %w", p.ref, l.Digest, err)
			}
			if seen[title] {
				return fmt.Errorf("%s: two layers are %s", p.ref, title)
			}
			seen[title] = true
			mode := modes[title]
			if mode == 0 {
				mode = 0o644
			}
			if err := f.writeFile(ctx, l, filepath.Join(dir, filepath.FromSlash(title)), mode, opts); err != nil {
				return err
			}
		case LockMediaType:
			b, err := f.blob(ctx, l, maxSmallBlob, opts)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tmp, entryLock), b, 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: layer %s has media type %q, which a bundle has not", p.ref, l.Digest, l.MediaType)
		}
	}
	if err := f.fetchAttestation(ctx, tmp, name+".sigstore.json", d, opts); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(tmp, entryManifest), desc.Manifest, 0o644)
}

// checkTitle refuses a layer's path that is not a plain relative path
// inside the bundle.
func checkTitle(t string) error {
	if t == "" || strings.ContainsAny(t, "\\\x00") || path.Clean(t) != t || !filepath.IsLocal(filepath.FromSlash(t)) || strings.HasPrefix(t, ".") {
		return fmt.Errorf("%q is not a path inside a bundle", t)
	}
	return nil
}

// fetcher reads blobs of one repository.
type fetcher struct {
	ref  Ref
	opts []remote.Option
}

// open reads layer l by digest, never more than its declared size, and
// fails at its end unless the bytes are the digest's.
func (p fetcher) open(l v1.Descriptor, opts []remote.Option) (io.Reader, io.Closer, error) {
	lr := p.ref.Digest(l.Digest.String())
	layer, err := remote.Layer(lr.Reference.(name.Digest), opts...)
	if err != nil {
		return nil, nil, explain("fetching", lr, err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, nil, explain("fetching", lr, err)
	}
	return manifests.NewVerifyingReader(rc, l.Size, manifests.Digest{Algorithm: l.Digest.Algorithm, Hex: l.Digest.Hex}), rc, nil
}

func (p fetcher) blob(_ context.Context, l v1.Descriptor, max int64, opts []remote.Option) ([]byte, error) {
	if l.Size > max {
		return nil, fmt.Errorf("%s: layer %s declares %d bytes, more than %d", p.ref, l.Digest, l.Size, max)
	}
	r, c, err := p.open(l, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: layer %s: %w", p.ref, l.Digest, err)
	}
	return b, nil
}

func (p fetcher) writeFile(_ context.Context, l v1.Descriptor, dst string, mode fs.FileMode, opts []remote.Option) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	r, c, err := p.open(l, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("%s: layer %s (%s): %w", p.ref, l.Digest, l.Annotations[AnnotationTitle], err)
	}
	if err := f.Chmod(mode.Perm()); err != nil { // past the umask
		f.Close()
		return err
	}
	return f.Close()
}

// fetchAttestation writes the Sigstore bundle attached to artifact d
// into tmp as file: through the referrers API,
// or the referrers tag schema where the registry has none. When several
// are attached (a bundle sealed twice), the first by digest is taken.
func (p fetcher) fetchAttestation(ctx context.Context, tmp, file string, d v1.Hash, opts []remote.Option) error {
	idx, err := remote.Referrers(p.ref.Context().Digest(d.String()), opts...)
	if err != nil {
		return explain("listing the referrers of", p.ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return explain("listing the referrers of", p.ref, err)
	}
	for _, rd := range im.Manifests {
		if rd.ArtifactType != SigstoreBundleType {
			continue
		}
		rr := p.ref.Digest(rd.Digest.String())
		desc, err := remote.Get(rr.Reference, opts...)
		if err != nil {
			return explain("fetching the Sigstore bundle", rr, err)
		}
		var m manifest
		if err := json.Unmarshal(desc.Manifest, &m); err != nil {
			return fmt.Errorf("%s: %w", rr, err)
		}
		if m.Subject == nil || m.Subject.Digest != d || len(m.Layers) != 1 || m.Layers[0].MediaType != SigstoreBundleType {
			return fmt.Errorf("%s: not a Sigstore bundle attached to %s", rr, d)
		}
		b, err := p.blob(ctx, m.Layers[0], maxSmallBlob, opts)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, file), b, 0o644)
	}
	return nil
}

// Image is the Sandbox image the artifact names, fetched lazily by digest
// (each blob checked against its digest as it is read).
func (p *Pulled) SandboxImage(ctx context.Context, o Options) (v1.Image, error) {
	if p.Image == "" {
		return nil, errors.New("the artifact names no Sandbox image")
	}
	r, err := ParseRef(p.Image, p.ref.Insecure)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(r.Reference, o.remote(r, remote.WithContext(ctx))...)
	if err != nil {
		return nil, explain("fetching the Sandbox image", r, err)
	}
	return img, nil
}
