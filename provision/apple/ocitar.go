package apple

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

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
// layout archive for the tool, with go-containerregistry: tarball reads
// the docker-save archive, layout writes the layout (oci-layout,
// index.json, the blobs), and ociImage gives the image OCI media types.
// The config, and so the image id, is the same blob, byte for byte; the
// manifest is made here, so its digest is not the one `sealbench image`
// wrote.

// The annotations containerization names an image by.
const (
	containerdName = "io.containerd.image.name"
	ociRefName     = "org.opencontainers.image.ref.name"
)

// ociArchive writes dst, an OCI image layout archive of the image in the
// docker-save archive src: its one image, whose config must have digest
// id, under ref. dst is written under a temporary name and renamed.
func ociArchive(src, dst, ref string, id manifests.Digest) error {
	img, err := tarball.ImageFromPath(src, nil)
	if err != nil {
		return fmt.Errorf("reading the docker-save archive %s: %w", src, err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("%s: the config: %w", src, err)
	}
	if cfgName.String() != id.String() {
		return fmt.Errorf("%s: its config is %s, not the Sandbox image %s", src, cfgName, id)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("%s: the config: %w", src, err)
	}
	oci, err := asOCI(img)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(oci,
		layout.WithAnnotations(map[string]string{containerdName: ref, ociRefName: ref}),
		layout.WithPlatform(v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant})); err != nil {
		return fmt.Errorf("writing the OCI layout of %s: %w", src, err)
	}

	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarLayout(dir, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("archiving the OCI layout of %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// ociImage is a docker-save image as an OCI image: the same config bytes
// (so the same image id) and the same layer blobs, under OCI media types
// in a manifest of its own. go-containerregistry's mutate would re-encode
// the config, and so change the id.
type ociImage struct {
	src      v1.Image
	manifest []byte
}

var _ partial.CompressedImageCore = (*ociImage)(nil)

// ociLayerType is the OCI media type of a docker-save layer's.
var ociLayerType = map[types.MediaType]types.MediaType{
	types.DockerLayer:             types.OCILayer,
	types.DockerUncompressedLayer: types.OCIUncompressedLayer,
	types.OCILayer:                types.OCILayer,
	types.OCIUncompressedLayer:    types.OCIUncompressedLayer,
}

// asOCI is src with OCI media types.
func asOCI(src v1.Image) (v1.Image, error) {
	m, err := src.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.MediaType, m.Config.MediaType = types.OCIManifestSchema1, types.OCIConfigJSON
	for i, l := range m.Layers {
		mt, ok := ociLayerType[l.MediaType]
		if !ok {
			return nil, fmt.Errorf("the layer %s is a %s, which has no OCI media type", l.Digest, l.MediaType)
		}
		m.Layers[i].MediaType = mt
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&ociImage{src: src, manifest: b})
}

func (o *ociImage) RawConfigFile() ([]byte, error)      { return o.src.RawConfigFile() }
func (o *ociImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (o *ociImage) RawManifest() ([]byte, error)        { return o.manifest, nil }
func (o *ociImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	return o.src.LayerByDigest(h)
}

// tarLayout writes the OCI layout in dir to w as a tar: its directories
// and files in lexical order, owned by root, with fixed modes and no
// times, so that the same image gives the same archive. Every blob is
// hashed as it is copied and checked against its name.
func tarLayout(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755})
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: st.Size()}); err != nil {
			return err
		}
		hs := sha256.New()
		if _, err := io.Copy(io.MultiWriter(tw, hs), f); err != nil {
			return err
		}
		if hx, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hex.EncodeToString(hs.Sum(nil)) != hx {
			return fmt.Errorf("the blob %s holds sha256:%x", name, hs.Sum(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
