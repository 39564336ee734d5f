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
	config := []byte(`{"architecture":"arm64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:00"]}}`)
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
// with its platform, and every blob under its digest.
func TestOCIArchive(t *testing.T) {
	src, id := dockerSave(t)
	dst := filepath.Join(t.TempDir(), OCIArchive)
	if err := ociArchive(src, dst, "sealbench/sandbox:t", id); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, dst)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %s", files["oci-layout"])
	}
	for name, b := range files {
		if hx, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != hx {
				t.Errorf("%s holds sha256:%x", name, s)
			}
		}
	}
	var index struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %s, %v", files["index.json"], err)
	}
	m := index.Manifests[0]
	if m.MediaType != ociManifestType || m.Annotations[containerdName] != "sealbench/sandbox:t" || m.Annotations[ociRefName] != "sealbench/sandbox:t" ||
		m.Platform == nil || *m.Platform != (ociPlatform{Architecture: "arm64", OS: "linux"}) {
		t.Errorf("the manifest's descriptor: %+v", m)
	}
	var man struct {
		Config ociDescriptor   `json:"config"`
		Layers []ociDescriptor `json:"layers"`
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")], &man); err != nil {
		t.Fatal(err)
	}
	if man.Config.Digest != id.String() || len(man.Layers) != 1 || man.Layers[0].MediaType != ociLayerGzip {
		t.Errorf("the manifest: %+v", man)
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
}
