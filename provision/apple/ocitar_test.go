package apple

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealbench/sealbench/manifests"
)

// dockerSave writes a docker-save archive as go-containerregistry's
// tarball.Write lays it out (manifest.json last, the config named by its
// digest, each layer <hex>.tar.gz), leaving out the entries in drop, and
// returns its path and the image id.
func dockerSave(t *testing.T, drop ...string) (string, manifests.Digest) {
	t.Helper()
	var layer bytes.Buffer
	zw := gzip.NewWriter(&layer)
	zw.Write([]byte("not really a tar, but gzip"))
	zw.Close()
	ls := sha256.Sum256(layer.Bytes())
	lname := hex.EncodeToString(ls[:]) + ".tar.gz"
	diff := sha256.Sum256([]byte("not really a tar, but gzip"))
	config := []byte(`{"architecture":"arm64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:` + hex.EncodeToString(diff[:]) + `"]}}`)
	cs := sha256.Sum256(config)
	cname := "sha256:" + hex.EncodeToString(cs[:])
	mf, _ := json.Marshal([]map[string]any{{"Config": cname, "RepoTags": []string{"sealbench/sandbox:t"}, "Layers": []string{lname}}})
	p := filepath.Join(t.TempDir(), "sandbox-image.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{cname, config}, {lname, layer.Bytes()}, {"manifest.json", mf}} {
		if slices.ContainsFunc(drop, func(d string) bool { return strings.Contains(e.name, d) }) {
			continue
		}
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg})
		tw.Write(e.data)
	}
	tw.Close()
	f.Close()
	id, err := manifests.ParseDigest(cname)
	if err != nil {
		t.Fatal(err)
	}
	return p, id
}

// readTar returns the regular files of the tar at p.
func readTar(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			out[h.Name], _ = io.ReadAll(tr)
		}
	}
}

// TestOCIArchive: the layout `container image load` reads: oci-layout,
// index.json naming the image by the annotations containerization reads,
// with its platform, every blob under its digest, the config the same
// bytes (the same image id) and OCI media types throughout; and the same
// image makes the same archive, byte for byte.
func TestOCIArchive(t *testing.T) {
	src, id := dockerSave(t)
	dst := filepath.Join(t.TempDir(), OCIArchive)
	if err := ociArchive(src, dst, "sealbench/sandbox:t", id); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, dst)
	var lay struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(files["oci-layout"], &lay); err != nil || lay.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout: %s, %v", files["oci-layout"], err)
	}
	for name, b := range files {
		if hx, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != hx {
				t.Errorf("%s holds sha256:%x", name, s)
			}
		}
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 || index.MediaType != types.OCIImageIndex {
		t.Fatalf("index.json: %s, %v", files["index.json"], err)
	}
	m := index.Manifests[0]
	if m.MediaType != types.OCIManifestSchema1 || m.Annotations[containerdName] != "sealbench/sandbox:t" || m.Annotations[ociRefName] != "sealbench/sandbox:t" ||
		m.Platform == nil || m.Platform.Architecture != "arm64" || m.Platform.OS != "linux" {
		t.Errorf("the manifest's descriptor: %+v", m)
	}
	var man v1.Manifest
	if err := json.Unmarshal(files["blobs/sha256/"+m.Digest.Hex], &man); err != nil {
		t.Fatal(err)
	}
	if man.MediaType != types.OCIManifestSchema1 || man.Config.Digest.String() != id.String() || man.Config.MediaType != types.OCIConfigJSON ||
		len(man.Layers) != 1 || man.Layers[0].MediaType != types.OCILayer {
		t.Errorf("the manifest: %+v", man)
	}
	again := filepath.Join(t.TempDir(), OCIArchive)
	if err := ociArchive(src, again, "sealbench/sandbox:t", id); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(dst)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("the same image made two different archives")
	}
}

// TestOCIArchiveRefuses: another image than the one named, or an archive
// that lacks a part, makes no archive.
func TestOCIArchiveRefuses(t *testing.T) {
	src, _ := dockerSave(t)
	dst := filepath.Join(t.TempDir(), OCIArchive)
	other := manifests.DigestOf([]byte("another image"))
	if err := ociArchive(src, dst, "r:t", other); err == nil || !strings.Contains(err.Error(), "not the Sandbox image "+other.String()) {
		t.Errorf("another image: %v", err)
	}
	for _, drop := range []string{".tar.gz", "manifest.json", "sha256:"} {
		src, id := dockerSave(t, drop)
		if err := ociArchive(src, dst, "r:t", id); err == nil {
			t.Errorf("without %s: no error", drop)
		}
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("an archive was left: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*")); len(left) > 0 {
		t.Errorf("temporary files were left: %v", left)
	}
}
