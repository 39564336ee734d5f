//go:build linux

package standin

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
)

func TestPingVersionInfo(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	ping, err := s.cli.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ping.APIVersion != APIVersion || ping.OSType != "linux" {
		t.Errorf("ping: %+v", ping)
	}
	v, err := s.cli.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.APIVersion != APIVersion || v.MinAPIVersion != MinAPIVersion || v.KernelVersion == "" {
		t.Errorf("version: %+v", v)
	}
	info, err := s.cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.KernelVersion == "" || info.NCPU < 1 || info.MemTotal <= 0 || info.Name == "" {
		t.Errorf("info lacks kernel, CPUs, memory or name: %+v", info)
	}
	// Negotiation: the client settles on the server's version (or lower).
	if got := s.cli.ClientVersion(); got != APIVersion {
		t.Errorf("negotiated API version %s, want %s", got, APIVersion)
	}
}

func TestAPIVersionsAndUnknownEndpoints(t *testing.T) {
	s := newTestServer(t)
	for _, tc := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"GET", "/v1.41/version", 200, ""},
		{"GET", "/v1.24/_ping", 200, ""},
		{"GET", "/v1.12/version", 400, "too old"},
		{"GET", "/v1.99/version", 400, "too new"},
		{"POST", "/v1.41/networks/create", 501, "POST /networks/create"},
		{"POST", "/build", 501, "POST /build"},
		{"GET", "/nonsense", 404, "GET /nonsense"},
		{"GET", "/v1.41/containers/nope/json", 404, "No such container: nope"},
		{"GET", "/images/nope:1/json", 404, "No such image: nope:1"},
	} {
		resp, body := s.raw(t, tc.method, tc.path, nil)
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: status %d, want %d (%s)", tc.method, tc.path, resp.StatusCode, tc.code, body)
		}
		if tc.msg != "" && !strings.Contains(string(body), `"message"`) || !strings.Contains(string(body), tc.msg) {
			t.Errorf("%s %s: body %s, want a message with %q", tc.method, tc.path, body, tc.msg)
		}
	}
}

func TestImageLoadListInspectRemove(t *testing.T) {
	testenv.NeedRoot(t) // unpacking chowns files and makes whiteout device nodes
	s := newTestServer(t)
	ctx := context.Background()
	base := layerTar(t, []entry{{name: "etc/", typ: tar.TypeDir}, {name: "etc/hello", body: "one"}, {name: "etc/abs", typ: tar.TypeSymlink, link: "/etc/hello"}, {name: "./etc/hl", typ: tar.TypeLink, link: "./etc/hello"}, {name: "gone", body: "x"}, {name: "dir/", typ: tar.TypeDir}, {name: "dir/old", body: "o"}})
	top := layerTar(t, []entry{{name: ".wh.gone", body: ""}, {name: "dir/", typ: tar.TypeDir}, {name: "dir/.wh..wh..opq", body: ""}, {name: "dir/new", body: "n"}})
	img := buildImage(t, base, top)
	for _, format := range []struct {
		name string
		tar  []byte
	}{{"docker-save", dockerSaveTar(t, "example.com/test/img:v1", img)}, {"oci-layout", ociLayoutTar(t, "example.com/test/img:v1", img)}, {"docker-save-25", docker25SaveTar(t, "example.com/test/img:v1", img)}} {
		t.Run(format.name, func(t *testing.T) {
			s.load(t, format.tar)
			list, err := s.cli.ImageList(ctx, image.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := img.ConfigName()
			if len(list) != 1 || list[0].ID != want.String() || len(list[0].RepoTags) != 1 || list[0].RepoTags[0] != "example.com/test/img:v1" {
				t.Fatalf("image list: %+v, want one image %s tagged example.com/test/img:v1", list, want)
			}
			insp, err := s.cli.ImageInspect(ctx, "example.com/test/img:v1")
			if err != nil {
				t.Fatal(err)
			}
			if insp.ID != want.String() || len(insp.RootFS.Layers) != 2 || insp.Config == nil || insp.Config.Cmd[0] != "sh" {
				t.Errorf("inspect: %+v", insp)
			}
			// Whiteouts are stored in overlayfs form.
			layers, _ := filepath.Glob(filepath.Join(s.state, "layers", "*"))
			if len(layers) != 2 {
				t.Fatalf("layers stored: %v", layers)
			}
			var topDir string
			for _, l := range layers {
				if _, err := os.Lstat(filepath.Join(l, "dir", "new")); err == nil {
					topDir = l
				}
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(topDir, "gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
				t.Errorf("whiteout of gone: %v, mode %o rdev %d", err, st.Mode, st.Rdev)
			}
			buf := make([]byte, 8)
			n, err := unix.Lgetxattr(filepath.Join(topDir, "dir"), opaqueXattr, buf)
			if err != nil || string(buf[:n]) != "y" {
				t.Errorf("opaque dir: %q, %v", buf[:n], err)
			}
			del, err := s.cli.ImageRemove(ctx, "example.com/test/img:v1", image.RemoveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(del) != 4 || del[0].Untagged != "example.com/test/img:v1" || del[1].Deleted != want.String() {
				t.Errorf("remove: %+v", del)
			}
			if list, _ := s.cli.ImageList(ctx, image.ListOptions{}); len(list) != 0 {
				t.Errorf("images left after remove: %+v", list)
			}
			if layers, _ := filepath.Glob(filepath.Join(s.state, "layers", "*")); len(layers) != 0 {
				t.Errorf("layers left after remove: %v", layers)
			}
		})
	}
}

func TestImageLoadRejectsWrongDigest(t *testing.T) {
	testenv.NeedRoot(t) // unpacking chowns files and makes whiteout device nodes
	s := newTestServer(t)
	layer := layerTar(t, []entry{{name: "a", body: "a"}})
	bad := rawSaveTar(t, "bad:1", layer, "sha256:"+strings.Repeat("0", 64))
	_, err := s.cli.ImageLoad(context.Background(), bytes.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("loading a layer with a wrong diff ID: %v, want a digest error", err)
	}
	assertEmptyStore(t, s)
	// A blob whose name is not its digest, though its diff ID is right.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	cfg := rawConfig(t, layer)
	wrong := strings.Repeat("ab", 32)
	man := fmt.Sprintf(`[{"Config":"blobs/sha256/%s","RepoTags":["bad:2"],"Layers":["blobs/sha256/%s"]}]`, digestHex(cfg), wrong)
	for _, f := range []struct {
		n string
		b []byte
	}{{"blobs/sha256/" + digestHex(cfg), cfg}, {"blobs/sha256/" + wrong, layer}, {"manifest.json", []byte(man)}} {
		tw.WriteHeader(&tar.Header{Name: f.n, Mode: 0o644, Size: int64(len(f.b)), Typeflag: tar.TypeReg})
		tw.Write(f.b)
	}
	tw.Close()
	if _, err := s.cli.ImageLoad(context.Background(), bytes.NewReader(buf.Bytes())); err == nil || !strings.Contains(err.Error(), "layer blob") {
		t.Errorf("loading a blob whose name is not its digest: %v", err)
	}
	assertEmptyStore(t, s)
	// The same tar with the right digest loads: the check can pass.
	s.load(t, rawSaveTar(t, "good:1", layer, ""))
	if _, err := s.cli.ImageInspect(context.Background(), "good:1"); err != nil {
		t.Fatal(err)
	}
}

func assertEmptyStore(t *testing.T, s *testServer) {
	t.Helper()
	for _, d := range []string{"layers", "images", "tmp"} {
		if ents, _ := os.ReadDir(filepath.Join(s.state, d)); len(ents) != 0 {
			t.Errorf("%s/ holds %d entries after a refused load", d, len(ents))
		}
	}
}

func TestImageLoadRejectsTraversal(t *testing.T) {
	testenv.NeedRoot(t) // unpacking chowns files and makes whiteout device nodes
	s := newTestServer(t)
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	// What a layer must not remove, replace or mark either.
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(s.state, "tmp", "layer-x"), outside)
	if err != nil {
		t.Fatal(err)
	}
	for name, es := range map[string][]entry{
		"dotdot":                    {{name: "../../../../evil", body: "x"}},
		"dotdot to outside":         {{name: rel + "/evil", body: "x"}},
		"absolute":                  {{name: outside + "/evil", body: "x"}},
		"through symlink":           {{name: "link", typ: tar.TypeSymlink, link: outside}, {name: "link/evil", body: "x"}},
		"through rel symlink":       {{name: "d/", typ: tar.TypeDir}, {name: "d/link", typ: tar.TypeSymlink, link: "../../../../../../../" + outside}, {name: "d/link/evil", body: "x"}},
		"symlink climbing out":      {{name: "link", typ: tar.TypeSymlink, link: "../../etc"}},
		"hard link outside":         {{name: "hl", typ: tar.TypeLink, link: "../../../../../etc/passwd"}},
		"hard link absolute":        {{name: "hl", typ: tar.TypeLink, link: "/etc/passwd"}},
		"hard link via symlink":     {{name: "s", typ: tar.TypeSymlink, link: "/etc"}, {name: "hl", typ: tar.TypeLink, link: "s/passwd"}},
		"hard link to outside":      {{name: "hl", typ: tar.TypeLink, link: victim}},
		"overwrite through symlink": {{name: "link", typ: tar.TypeSymlink, link: outside}, {name: "link/victim", body: "owned"}},
		"whiteout through symlink":  {{name: "link", typ: tar.TypeSymlink, link: outside}, {name: "link/.wh.victim", body: ""}},
		"opaque through symlink":    {{name: "link", typ: tar.TypeSymlink, link: outside}, {name: "link/.wh..wh..opq", body: ""}},
		"whiteout climbing out":     {{name: "d/", typ: tar.TypeDir}, {name: "d/.wh...", body: ""}},
		"dir through symlink":       {{name: "link", typ: tar.TypeSymlink, link: outside}, {name: "link/sub/", typ: tar.TypeDir}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.cli.ImageLoad(context.Background(), bytes.NewReader(rawSaveTar(t, "evil:1", layerTar(t, es), "")))
			if err == nil {
				t.Fatal("a layer that writes outside itself loaded")
			}
			if !errdefsInvalid(err) {
				t.Errorf("error %v: want a 400", err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Errorf("wrote outside the state dir: %v", ents)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
				t.Errorf("a file outside the state dir was changed: %q, %v", b, err)
			}
			if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("the directory outside was changed: %v, %v", fi.Mode(), err)
			}
			if n, _ := unix.Getxattr(outside, "trusted.overlay.opaque", make([]byte, 8)); n > 0 {
				t.Error("the directory outside was marked opaque")
			}
			assertEmptyStore(t, s)
		})
	}
}

func errdefsInvalid(err error) bool { return cerrdefs.IsInvalidArgument(err) }

func TestImageRemoveConflicts(t *testing.T) {
	s := newTestServer(t)
	if _, err := s.cli.ImageRemove(context.Background(), "nope:1", image.RemoveOptions{}); !client.IsErrNotFound(err) {
		t.Errorf("removing a missing image: %v, want not found", err)
	}
}

func digestHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// rawConfig is an image config with one layer, layer.
func rawConfig(t *testing.T, layer []byte) []byte {
	b, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "config": map[string]any{"Cmd": []string{"sh"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + digestHex(layer)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImageLoadRefusesTagsDockerdRefuses loads tars whose tags dockerd's
// reference grammar refuses: the answer is dockerd's (200, the grammar's
// words in an errorDetail line), and nothing is stored. Inspecting such a
// name is dockerd's 400.
func TestImageLoadRefusesTagsDockerdRefuses(t *testing.T) {
	s := newTestServer(t)
	layer := layerTar(t, []entry{{name: "a", body: "a"}})
	for _, tc := range []struct{ tag, msg string }{
		{"../../../../evil:latest", "invalid reference format"},
		{"Evil:latest", "invalid reference format: repository name (library/Evil) must be lowercase"},
		{strings.Repeat("a", 300) + ":latest", "repository name must not be more than 255 characters"},
		{"ok:" + strings.Repeat("t", 129), "invalid reference format"},
		{"", "invalid reference format"},
	} {
		resp, body := s.raw(t, http.MethodPost, "/images/load", bytes.NewReader(rawSaveTar(t, tc.tag, layer, "")))
		var line struct {
			ErrorDetail struct{ Message string } `json:"errorDetail"`
			Error       string
		}
		if err := json.Unmarshal(body, &line); err != nil || resp.StatusCode != http.StatusOK || line.Error != tc.msg || line.ErrorDetail.Message != tc.msg {
			t.Errorf("load with tag %.40q: status %d, answer %s; want 200 and %q", tc.tag, resp.StatusCode, body, tc.msg)
		}
		assertEmptyStore(t, s)
	}
	resp, body := s.raw(t, http.MethodGet, "/images/Evil:latest/json", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "must be lowercase") {
		t.Errorf("inspect Evil:latest: status %d, %s; want 400 as dockerd", resp.StatusCode, body)
	}
}
