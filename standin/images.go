//go:build linux

package standin

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/manifests"
)

// Errors the stand-in wraps to say what went wrong: the Engine API's
// sentinels, which choose an answer's status (engineapi.Fail), and the
// command line's exit code.
var (
	ErrNotFound = engineapi.ErrNotFound
	ErrConflict = engineapi.ErrConflict
	ErrBadInput = engineapi.ErrBadInput
)

// imageStore holds images under a state directory:
//
//	images/<config hex>/config.json   the config blob, as loaded (its digest is the image ID)
//	images/<config hex>/image.json    the record: tags and layers
//	layers/<diff id hex>/             a layer unpacked, whiteouts in overlayfs form
//	tmp/                              spooled uploads and half-unpacked layers
type imageStore struct {
	root string

	mu     sync.Mutex
	images map[manifests.Digest]*imageRecord
}

func openImageStore(root string) (*imageStore, error) {
	s := &imageStore{root: root, images: map[manifests.Digest]*imageRecord{}}
	for _, d := range []string{"images", "layers", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return nil, fmt.Errorf("creating image store directory: %w", err)
		}
	}
	// Anything in tmp is left from a crash: half-unpacked layers, spools.
	if err := clearDir(filepath.Join(root, "tmp")); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(root, "images"))
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	for _, e := range ents {
		rec, err := s.readRecord(e.Name())
		if err != nil {
			return nil, err
		}
		s.images[rec.ID] = rec
	}
	return s, nil
}

func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %q: %w", dir, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("removing leftover %q: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}

func (s *imageStore) readRecord(hexID string) (*imageRecord, error) {
	dir := filepath.Join(s.root, "images", hexID)
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, fmt.Errorf("reading image record: %w", err)
	}
	rec := &imageRecord{}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("parsing image record %q: %w", dir, err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	if got := manifests.DigestOf(cfg); got != rec.ID {
		return nil, fmt.Errorf("image config %q has digest %s, want %s", dir, got, rec.ID)
	}
	if err := json.Unmarshal(cfg, &rec.config); err != nil {
		return nil, fmt.Errorf("parsing image config %q: %w", dir, err)
	}
	return rec, nil
}

// layerDir is where the layer with this diff ID is unpacked.
func (s *imageStore) layerDir(d manifests.Digest) string {
	return filepath.Join(s.root, "layers", d.Hex)
}

// ErrInvalidTag says an image tar names an image with a tag dockerd's
// reference grammar refuses (github.com/distribution/reference: lower-case
// path components, a tag of [\w][\w.-]{0,127}, a name of at most 255
// characters). dockerd reports it inside the load's answer (status 200,
// an "errorDetail" line), and so does the stand-in; unlike dockerd, it
// refuses before it stores any layer.
var ErrInvalidTag = errors.New("invalid tag")

// checkTag checks one of an image tar's tags against dockerd's reference
// grammar, with its words. (A name without a tag is kept as name:latest,
// as before; dockerd refuses one in a docker-save manifest.)
func checkTag(tag string) error {
	if _, err := reference.ParseNormalizedNamed(tag); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTag, err)
	}
	return nil
}

// normalizeRef turns a user's image reference into the form tags are kept
// in: "busybox" and "docker.io/library/busybox" are "busybox:latest".
func normalizeRef(ref string) string {
	ref = strings.TrimPrefix(ref, "docker.io/")
	ref = strings.TrimPrefix(ref, "library/")
	if strings.Contains(ref, "@") {
		return ref
	}
	if i := strings.LastIndex(ref, ":"); i < 0 || strings.Contains(ref[i:], "/") {
		ref += ":latest"
	}
	return ref
}

// resolve finds an image by ID ("sha256:<hex>", the hex, or a unique hex
// prefix of at least 4 characters) or by tag.
func (s *imageStore) resolve(ref string) (*imageRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resolveLocked(ref)
}

func (s *imageStore) resolveLocked(ref string) (*imageRecord, error) {
	if d, err := manifests.ParseDigest(ref); err == nil {
		if rec, ok := s.images[d]; ok {
			return rec, nil
		}
		return nil, fmt.Errorf("%w: No such image: %s", ErrNotFound, ref)
	}
	// dockerd answers a reference its grammar refuses with 400 and the
	// grammar's words, before looking for it.
	if _, err := reference.ParseAnyReference(ref); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	tag := normalizeRef(ref)
	for _, rec := range s.images {
		for _, t := range rec.RepoTags {
			if t == tag {
				return rec, nil
			}
		}
	}
	if isHex(ref) && len(ref) >= 4 {
		var found *imageRecord
		for id, rec := range s.images {
			if strings.HasPrefix(id.Hex, ref) {
				if found != nil {
					return nil, fmt.Errorf("%w: image ID prefix %q is ambiguous", ErrBadInput, ref)
				}
				found = rec
			}
		}
		if found != nil {
			return found, nil
		}
	}
	return nil, fmt.Errorf("%w: No such image: %s", ErrNotFound, ref)
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// list returns every image, newest load first.
func (s *imageStore) list() []*imageRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*imageRecord, 0, len(s.images))
	for _, r := range s.images {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Loaded.Equal(out[j].Loaded) {
			return out[i].Loaded.After(out[j].Loaded)
		}
		return out[i].ID.Hex < out[j].ID.Hex
	})
	return out
}

// DeleteResult is one line of an image removal's answer.
type deleteResult struct {
	Untagged string `json:",omitempty"`
	Deleted  string `json:",omitempty"`
}

// remove untags ref; when ref is an ID, or its last tag goes, the image and
// its layers that no other image uses are deleted. inUse says whether a
// container uses the image; such an image is only removed with force.
func (s *imageStore) remove(ref string, force bool, inUse func(manifests.Digest) bool) ([]deleteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.resolveLocked(ref)
	if err != nil {
		return nil, err
	}
	var out []deleteResult
	tag := normalizeRef(ref)
	byTag := false
	for i, t := range rec.RepoTags {
		if t == tag {
			byTag = true
			if len(rec.RepoTags) > 1 {
				rec.RepoTags = append(rec.RepoTags[:i:i], rec.RepoTags[i+1:]...)
				if err := s.writeRecordLocked(rec); err != nil {
					return nil, err
				}
				return []deleteResult{{Untagged: t}}, nil
			}
			break
		}
	}
	if !byTag && len(rec.RepoTags) > 1 && !force {
		return nil, fmt.Errorf("%w: unable to delete %s (must be forced) - image is referenced in multiple repositories", ErrConflict, rec.ID.Short(12))
	}
	if inUse(rec.ID) && !force {
		return nil, fmt.Errorf("%w: unable to delete %s (must be forced) - image is being used by a container", ErrConflict, rec.ID.Short(12))
	}
	for _, t := range rec.RepoTags {
		out = append(out, deleteResult{Untagged: t})
	}
	delete(s.images, rec.ID)
	if err := os.RemoveAll(filepath.Join(s.root, "images", rec.ID.Hex)); err != nil {
		return out, fmt.Errorf("removing image %s: %w", rec.ID, err)
	}
	out = append(out, deleteResult{Deleted: rec.ID.String()})
	used := map[manifests.Digest]bool{}
	for _, r := range s.images {
		for _, l := range r.DiffIDs {
			used[l] = true
		}
	}
	for _, l := range rec.DiffIDs {
		if used[l] || inUse(rec.ID) {
			continue // a running Sandbox's overlay still reads it
		}
		if err := os.RemoveAll(s.layerDir(l)); err != nil {
			return out, fmt.Errorf("removing layer %s: %w", l, err)
		}
		out = append(out, deleteResult{Deleted: l.String()})
		used[l] = true
	}
	return out, nil
}

// gcLayers removes the layers of a removed image that no image and no
// container (inUse) uses any more: the ones a forced removal kept for a
// running container.
func (s *imageStore) gcLayers(img *imageRecord, inUse func(manifests.Digest) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.images[img.ID]; ok || inUse(img.ID) {
		return nil
	}
	used := map[manifests.Digest]bool{}
	for _, r := range s.images {
		for _, l := range r.DiffIDs {
			used[l] = true
		}
	}
	var errs []error
	for _, l := range img.DiffIDs {
		if !used[l] {
			if err := os.RemoveAll(s.layerDir(l)); err != nil {
				errs = append(errs, fmt.Errorf("removing layer %s: %w", l, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (s *imageStore) writeRecordLocked(rec *imageRecord) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(s.root, "images", rec.ID.Hex, "image.json")
	if err := atomicfile.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing image record %q: %w", p, err)
	}
	return nil
}

// loadedImage is what a load reports per image.
type loadedImage struct {
	ID   manifests.Digest
	Tags []string
}

// spooled is an uploaded image tar kept on disk for random access.
type spooled struct {
	f       *os.File
	entries map[string]spoolEntry
}

type spoolEntry struct{ off, size int64 }

func (sp *spooled) open(name string) (*io.SectionReader, error) {
	e, ok := sp.entries[path.Clean(name)]
	if !ok {
		return nil, fmt.Errorf("%w: image tar has no file %q", ErrBadInput, name)
	}
	return io.NewSectionReader(sp.f, e.off, e.size), nil
}

func (sp *spooled) has(name string) bool { _, ok := sp.entries[path.Clean(name)]; return ok }

// readAll reads a small file (a manifest or config) from the tar.
func (sp *spooled) readAll(name string) ([]byte, error) {
	r, err := sp.open(name)
	if err != nil {
		return nil, err
	}
	if r.Size() > 16<<20 {
		return nil, fmt.Errorf("%w: %q is %d bytes, too large for metadata", ErrBadInput, name, r.Size())
	}
	return io.ReadAll(r)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// spool copies the upload into tmp and indexes its regular files.
func (s *imageStore) spool(r io.Reader) (*spooled, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "load-*.tar")
	if err != nil {
		return nil, fmt.Errorf("creating spool file: %w", err)
	}
	os.Remove(f.Name()) // unlinked: gone when closed, even after a crash
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, fmt.Errorf("receiving image tar: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	// Unbuffered, so that the count is where each entry's data starts:
	// tar.Reader reads headers in exact 512-byte blocks.
	cr := &countingReader{r: f}
	tr := tar.NewReader(cr)
	sp := &spooled{f: f, entries: map[string]spoolEntry{}}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: reading image tar: %v", ErrBadInput, err)
		}
		if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA { //nolint:staticcheck
			sp.entries[path.Clean(hdr.Name)] = spoolEntry{off: cr.n, size: hdr.Size}
		}
	}
	return sp, nil
}

// load reads an image tar, `docker save` or OCI layout, and stores every
// image in it. Every blob is checked against its digest while it is read,
// and every layer against the config's diff ID; nothing half-loaded is
// kept.
func (s *imageStore) load(r io.Reader) ([]loadedImage, error) {
	sp, err := s.spool(r)
	if err != nil {
		return nil, err
	}
	defer sp.f.Close()
	type todo struct {
		config  []byte
		tags    []string
		layers  []string           // file names in the tar
		digests []manifests.Digest // blob digests where the format names them
		sizes   []int64            // -1 where unknown
	}
	var todos []todo
	switch {
	case sp.has("manifest.json"):
		b, err := sp.readAll("manifest.json")
		if err != nil {
			return nil, err
		}
		var ms []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.Unmarshal(b, &ms); err != nil {
			return nil, fmt.Errorf("%w: parsing manifest.json: %v", ErrBadInput, err)
		}
		for _, m := range ms {
			cfg, err := sp.readAll(m.Config)
			if err != nil {
				return nil, err
			}
			if want, ok := digestFromName(m.Config); ok && manifests.DigestOf(cfg) != want {
				return nil, fmt.Errorf("%w: config %q has digest %s", ErrBadInput, m.Config, manifests.DigestOf(cfg))
			}
			t := todo{config: cfg, tags: m.RepoTags, layers: m.Layers}
			for _, l := range m.Layers {
				d, _ := digestFromName(l)
				t.digests = append(t.digests, d)
				t.sizes = append(t.sizes, -1)
			}
			todos = append(todos, t)
		}
	case sp.has("index.json"):
		b, err := sp.readAll("index.json")
		if err != nil {
			return nil, err
		}
		var idx ocispec.Index
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("%w: parsing index.json: %v", ErrBadInput, err)
		}
		mans, err := s.ociManifests(sp, idx, 0)
		if err != nil {
			return nil, err
		}
		for _, m := range mans {
			cfg, err := readBlob(sp, m.man.Config)
			if err != nil {
				return nil, err
			}
			t := todo{config: cfg, tags: m.tags}
			for _, l := range m.man.Layers {
				d, err := manifests.ParseDigest(string(l.Digest))
				if err != nil {
					return nil, fmt.Errorf("%w: layer descriptor: %v", ErrBadInput, err)
				}
				t.layers = append(t.layers, "blobs/sha256/"+d.Hex)
				t.digests = append(t.digests, d)
				t.sizes = append(t.sizes, l.Size)
			}
			todos = append(todos, t)
		}
	default:
		return nil, fmt.Errorf("%w: not an image tar: neither manifest.json nor index.json at its top", ErrBadInput)
	}
	if len(todos) == 0 {
		return nil, fmt.Errorf("%w: the image tar holds no image", ErrBadInput)
	}

	// Every tag is checked before any layer is stored.
	for _, t := range todos {
		for _, tag := range t.tags {
			if err := checkTag(tag); err != nil {
				return nil, err
			}
		}
	}
	var out []loadedImage
	for _, t := range todos {
		var cfg dockerspec.DockerOCIImage
		if err := json.Unmarshal(t.config, &cfg); err != nil {
			return nil, fmt.Errorf("%w: parsing image config: %v", ErrBadInput, err)
		}
		if len(cfg.RootFS.DiffIDs) != len(t.layers) {
			return nil, fmt.Errorf("%w: image config lists %d layers, manifest %d", ErrBadInput, len(cfg.RootFS.DiffIDs), len(t.layers))
		}
		rec := &imageRecord{ID: manifests.DigestOf(t.config), Loaded: time.Now().UTC(), config: cfg}
		for i, l := range t.layers {
			diffID, err := manifests.ParseDigest(string(cfg.RootFS.DiffIDs[i]))
			if err != nil {
				return nil, fmt.Errorf("%w: image config diff_ids[%d]: %v", ErrBadInput, i, err)
			}
			size, err := s.storeLayer(sp, l, t.digests[i], t.sizes[i], diffID)
			if err != nil {
				return nil, fmt.Errorf("loading layer %d (%s): %w", i, diffID.Short(12), err)
			}
			rec.DiffIDs = append(rec.DiffIDs, diffID)
			rec.Size += size
		}
		for _, tag := range t.tags {
			rec.RepoTags = append(rec.RepoTags, normalizeRef(tag))
		}
		if err := s.addImage(rec, t.config); err != nil {
			return nil, err
		}
		out = append(out, loadedImage{ID: rec.ID, Tags: rec.RepoTags})
	}
	return out, nil
}

// addImage writes the image's files and moves its tags onto it.
func (s *imageStore) addImage(rec *imageRecord, config []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.root, "images", rec.ID.Hex)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating image directory: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "config.json"), config, 0o600); err != nil {
		return fmt.Errorf("writing image config: %w", err)
	}
	if old, ok := s.images[rec.ID]; ok {
		rec.RepoTags = mergeTags(old.RepoTags, rec.RepoTags)
	}
	for _, other := range s.images {
		if other.ID == rec.ID {
			continue
		}
		kept := other.RepoTags[:0:0]
		for _, t := range other.RepoTags {
			if !contains(rec.RepoTags, t) {
				kept = append(kept, t)
			}
		}
		if len(kept) != len(other.RepoTags) {
			other.RepoTags = kept
			if err := s.writeRecordLocked(other); err != nil {
				return err
			}
		}
	}
	if err := s.writeRecordLocked(rec); err != nil {
		return err
	}
	s.images[rec.ID] = rec
	return nil
}

func mergeTags(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, t := range b {
		if !contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// digestFromName reads a digest from a blob's file name in the tar:
// "blobs/sha256/<hex>" or the legacy "<hex>.json".
func digestFromName(name string) (manifests.Digest, bool) {
	name = path.Clean(name)
	if h, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
		d, err := manifests.ParseDigest("sha256:" + h)
		return d, err == nil
	}
	if h, ok := strings.CutSuffix(name, ".json"); ok && !strings.Contains(h, "/") {
		d, err := manifests.ParseDigest("sha256:" + h)
		return d, err == nil
	}
	return manifests.Digest{}, false
}

type ociImage struct {
	man  ocispec.Manifest
	tags []string
}

// ociManifests walks an OCI index (and nested indexes) to its image
// manifests for this platform family (linux), checking every blob.
func (s *imageStore) ociManifests(sp *spooled, idx ocispec.Index, depth int) ([]ociImage, error) {
	if depth > 4 {
		return nil, fmt.Errorf("%w: OCI indexes nested too deep", ErrBadInput)
	}
	var out []ociImage
	for _, desc := range idx.Manifests {
		b, err := readBlob(sp, desc)
		if err != nil {
			return nil, err
		}
		switch desc.MediaType {
		case ocispec.MediaTypeImageIndex, "application/vnd.docker.distribution.manifest.list.v2+json":
			var sub ocispec.Index
			if err := json.Unmarshal(b, &sub); err != nil {
				return nil, fmt.Errorf("%w: parsing index %s: %v", ErrBadInput, desc.Digest, err)
			}
			more, err := s.ociManifests(sp, sub, depth+1)
			if err != nil {
				return nil, err
			}
			tags := ociTags(desc)
			for i := range more {
				more[i].tags = mergeTags(more[i].tags, tags)
			}
			out = append(out, more...)
		default:
			if desc.Platform != nil && desc.Platform.OS != "" && desc.Platform.OS != "linux" {
				continue
			}
			var m ocispec.Manifest
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("%w: parsing manifest %s: %v", ErrBadInput, desc.Digest, err)
			}
			if m.Config.Digest == "" {
				continue // an attestation or other artifact, not an image
			}
			out = append(out, ociImage{man: m, tags: ociTags(desc)})
		}
	}
	return out, nil
}

// ociTags reads the image name from a descriptor's annotations: the full
// name containerd and Docker write, or a ref.name that is a full reference.
func ociTags(desc ocispec.Descriptor) []string {
	if n := desc.Annotations["io.containerd.image.name"]; n != "" {
		return []string{n}
	}
	if n := desc.Annotations[ocispec.AnnotationRefName]; n != "" && (strings.Contains(n, ":") || strings.Contains(n, "/")) {
		return []string{n}
	}
	return nil
}

// readBlob reads a small blob named by a descriptor and checks its size and digest.
func readBlob(sp *spooled, desc ocispec.Descriptor) ([]byte, error) {
	d, err := manifests.ParseDigest(string(desc.Digest))
	if err != nil {
		return nil, fmt.Errorf("%w: descriptor: %v", ErrBadInput, err)
	}
	b, err := sp.readAll("blobs/sha256/" + d.Hex)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != desc.Size {
		return nil, fmt.Errorf("%w: blob %s is %d bytes, its descriptor says %d", ErrBadInput, d, len(b), desc.Size)
	}
	if got := manifests.DigestOf(b); got != d {
		return nil, fmt.Errorf("%w: blob %s has digest %s", ErrBadInput, d, got)
	}
	return b, nil
}

// verifyReader hashes what passes through it and, at EOF, fails unless the
// digest (and, where known, the size) match.
type verifyReader struct {
	r    io.Reader
	h    hash.Hash
	want manifests.Digest
	size int64 // -1: unknown
	n    int64
	what string
}

func newVerifyReader(r io.Reader, want manifests.Digest, size int64, what string) *verifyReader {
	return &verifyReader{r: r, h: sha256.New(), want: want, size: size, what: what}
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.size >= 0 && v.n+int64(len(p)) > v.size+1 {
		p = p[:v.size+1-v.n] // read one byte past the declared size to detect overrun
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.size >= 0 && v.n > v.size {
		return n, fmt.Errorf("%w: %s is longer than its declared %d bytes", ErrBadInput, v.what, v.size)
	}
	if err == io.EOF {
		if v.size >= 0 && v.n != v.size {
			return n, fmt.Errorf("%w: %s is %d bytes, declared %d", ErrBadInput, v.what, v.n, v.size)
		}
		if got := manifests.DigestFromHash(v.h); got != v.want {
			return n, fmt.Errorf("%w: %s has digest %s, want %s", ErrBadInput, v.what, got, v.want)
		}
	}
	return n, err
}

// storeLayer checks the layer blob name (its digest blobDigest where
// known) against its digests and, unless the layer is already stored,
// unpacks it into layers/<diff id hex>. It returns the unpacked size.
func (s *imageStore) storeLayer(sp *spooled, name string, blobDigest manifests.Digest, size int64, diffID manifests.Digest) (int64, error) {
	sr, err := sp.open(name)
	if err != nil {
		return 0, err
	}
	var r io.Reader = sr
	if !blobDigest.IsZero() {
		r = newVerifyReader(sr, blobDigest, size, "layer blob "+blobDigest.Short(12))
	}
	br := bufio.NewReader(r)
	var ur io.Reader = br
	if magic, _ := br.Peek(4); len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, fmt.Errorf("%w: opening gzip layer: %v", ErrBadInput, err)
		}
		ur = zr
	} else if len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd {
		return 0, fmt.Errorf("%w: zstd-compressed layers are not supported; save the image uncompressed or gzip", ErrBadInput)
	}
	vr := newVerifyReader(ur, diffID, -1, "layer "+diffID.Short(12)+" (uncompressed)")
	final := s.layerDir(diffID)
	if _, err := os.Stat(final); err == nil {
		// Stored already: still check the upload is what it claims.
		if _, err := io.Copy(io.Discard, vr); err != nil {
			return 0, err
		}
		if _, err := io.Copy(io.Discard, br); err != nil {
			return 0, err
		}
		return dirSize(final), nil
	}
	tmp := filepath.Join(s.root, "tmp", "layer-"+randomHex(8))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return 0, fmt.Errorf("creating layer directory: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	st, err := unpackLayer(vr, tmp)
	if err != nil {
		return 0, err
	}
	// The tar's end-of-archive blocks and any padding belong to the digest.
	if _, err := io.Copy(io.Discard, vr); err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(final); serr == nil {
			return dirSize(final), nil // a concurrent load stored it first
		}
		return 0, fmt.Errorf("storing layer: %w", err)
	}
	ok = true
	return st.Bytes, nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
