package apple

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/sealbench/sealbench/manifests"
)

// `container image load` reads only an OCI image layout: the archive is
// extracted and handed to containerization's ImageStore.load(from:)
// (Sources/Services/ContainerImagesService/Server/ImagesService.swift in
// apple/container 1.2.2), which reads oci-layout and index.json and
// names each image by its descriptor's annotations,
// com.apple.containerization.image.name, then io.containerd.image.name,
// then org.opencontainers.image.ref.name (Sources/ContainerizationOCI/
// Client/LocalOCILayoutClient.swift in apple/containerization 0.40.1, the
// release container 1.2.2 pins). The Sandbox image's tar is a `docker
// save` archive (manifest.json, the config, the layers) that Docker, the
// stand-in and msb load; ociArchive writes the same image as an OCI
// layout archive for the tool. The config, and so the image id, is the
// same blob; the manifest is made here, so its digest is not the one
// `sealbench image` wrote.

// OCI media types and annotations (image-spec v1.1).
const (
	ociLayoutFile   = "oci-layout"
	ociIndexFile    = "index.json"
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerTar     = "application/vnd.oci.image.layer.v1.tar"
	ociLayerGzip    = "application/vnd.oci.image.layer.v1.tar+gzip"
	containerdName  = "io.containerd.image.name"
	ociRefName      = "org.opencontainers.image.ref.name"
	smallBlob       = 1 << 20 // kept in memory from the first pass
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// blob is one file of the docker archive, as the first pass saw it.
type blob struct {
	hex  string
	size int64
	gzip bool
	data []byte // when at most smallBlob
}

// ociArchive writes dst, an OCI image layout archive of the image in the
// docker-save archive src: its one image, whose config must have digest
// id, under ref. dst is written under a temporary name and renamed.
func ociArchive(src, dst, ref string, id manifests.Digest) error {
	blobs, err := hashEntries(src)
	if err != nil {
		return err
	}
	mf, ok := blobs["manifest.json"]
	if !ok || mf.data == nil {
		return fmt.Errorf("%s holds no manifest.json: not a docker-save archive", src)
	}
	var entries []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(mf.data, &entries); err != nil {
		return fmt.Errorf("%s: manifest.json: %w", src, err)
	}
	if len(entries) != 1 {
		return fmt.Errorf("%s holds %d images, not the one Sandbox image", src, len(entries))
	}
	e := entries[0]
	cfg, ok := blobs[path.Clean(e.Config)]
	if !ok || cfg.data == nil {
		return fmt.Errorf("%s: the config %s is missing", src, e.Config)
	}
	if got := "sha256:" + cfg.hex; got != id.String() {
		return fmt.Errorf("%s: its config is %s, not the Sandbox image %s", src, got, id)
	}
	var config struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Variant      string `json:"variant"`
	}
	if err := json.Unmarshal(cfg.data, &config); err != nil {
		return fmt.Errorf("%s: the config: %w", src, err)
	}
	manifest := struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Config        ociDescriptor   `json:"config"`
		Layers        []ociDescriptor `json:"layers"`
	}{SchemaVersion: 2, MediaType: ociManifestType,
		Config: ociDescriptor{MediaType: ociConfigType, Digest: "sha256:" + cfg.hex, Size: cfg.size}, Layers: []ociDescriptor{}}
	want := map[string]string{path.Clean(e.Config): cfg.hex} // entry name: digest hex
	for _, l := range e.Layers {
		b, ok := blobs[path.Clean(l)]
		if !ok {
			return fmt.Errorf("%s: the layer %s is missing", src, l)
		}
		mt := ociLayerTar
		if b.gzip {
			mt = ociLayerGzip
		}
		manifest.Layers = append(manifest.Layers, ociDescriptor{MediaType: mt, Digest: "sha256:" + b.hex, Size: b.size})
		want[path.Clean(l)] = b.hex
	}
	mb, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	ms := sha256.Sum256(mb)
	index := struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Manifests     []ociDescriptor `json:"manifests"`
	}{SchemaVersion: 2, MediaType: ociIndexType, Manifests: []ociDescriptor{{
		MediaType: ociManifestType, Digest: "sha256:" + hex.EncodeToString(ms[:]), Size: int64(len(mb)),
		Platform:    &ociPlatform{Architecture: config.Architecture, OS: config.OS, Variant: config.Variant},
		Annotations: map[string]string{containerdName: ref, ociRefName: ref},
	}}}
	ib, err := json.Marshal(index)
	if err != nil {
		return err
	}

	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}); err != nil {
			return err
		}
	}
	small := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := small(ociLayoutFile, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := small(ociIndexFile, ib); err != nil {
		return err
	}
	if err := small("blobs/sha256/"+hex.EncodeToString(ms[:]), mb); err != nil {
		return err
	}
	if err := copyBlobs(src, tw, want, blobs); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// hashEntries reads every regular file of the tar at p: its digest, size
// and whether it is gzip, and its bytes when it is small.
func hashEntries(p string) (map[string]*blob, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*blob{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		hs := sha256.New()
		var head bytes.Buffer
		w := io.Writer(hs)
		if h.Size <= smallBlob {
			w = io.MultiWriter(hs, &head)
		} else {
			w = io.MultiWriter(hs, &limitedBuffer{b: &head, n: 2})
		}
		n, err := io.Copy(w, tr)
		if err != nil {
			return nil, fmt.Errorf("reading %s in %s: %w", h.Name, p, err)
		}
		b := &blob{hex: hex.EncodeToString(hs.Sum(nil)), size: n}
		hb := head.Bytes()
		b.gzip = len(hb) >= 2 && hb[0] == 0x1f && hb[1] == 0x8b
		if h.Size <= smallBlob {
			b.data = hb
		}
		out[path.Clean(h.Name)] = b
	}
}

// copyBlobs copies the entries of the tar at p named in want into tw as
// blobs/sha256/<hex>, each once, checking that each still has the digest
// the first pass found.
func copyBlobs(p string, tw *tar.Writer, want map[string]string, blobs map[string]*blob) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	done := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		name := path.Clean(h.Name)
		hx, ok := want[name]
		if !ok || h.Typeflag != tar.TypeReg || done[hx] {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "blobs/sha256/" + hx, Mode: 0o644, Size: blobs[name].size}); err != nil {
			return err
		}
		hs := sha256.New()
		if _, err := io.Copy(io.MultiWriter(tw, hs), tr); err != nil {
			return fmt.Errorf("copying %s from %s: %w", h.Name, p, err)
		}
		if got := hex.EncodeToString(hs.Sum(nil)); got != hx {
			return fmt.Errorf("%s in %s changed while it was read (sha256:%s, then sha256:%s)", h.Name, p, hx, got)
		}
		done[hx] = true
	}
	for name, hx := range want {
		if !done[hx] {
			return fmt.Errorf("%s in %s went while it was read", name, p)
		}
	}
	return nil
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
