// Package testimage builds the tiny image tests use where the Sandbox
// image would be too slow to build: busybox-static and a few of its
// applets, as `docker save` writes it. One builder, so that the stand-in's
// end-to-end tests and the targets' conformance suite load the same image.
package testimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sealbench/sealbench/manifests"
)

// epoch is every file's and the config's time, so that the image id is
// the same on every build from the same busybox.
var epoch = time.Unix(1700000000, 0).UTC()

// Busybox writes, to w, a busybox root filesystem (busybox is the path of
// a static busybox) as one layer of a `docker save` tar tagged tag, for
// this machine's architecture, and returns the image id. Its command is sh.
func Busybox(busybox, tag string, w io.Writer) (manifests.Digest, error) {
	return BusyboxCmd(busybox, tag, []string{"sh"}, w)
}

// BusyboxCmd is Busybox with cmd as the image's command: a Kubernetes
// pod sandbox's image (internal/kubetest's pause image), say, whose
// command sleeps.
func BusyboxCmd(busybox, tag string, cmd []string, w io.Writer) (manifests.Digest, error) {
	return BusyboxWith(busybox, tag, cmd, nil, w)
}

// BusyboxWith is BusyboxCmd with, in a second layer, this machine's
// binaries bins (absolute paths, kept at them) and the libraries each
// links (as ldd names them): coreutils' chroot, say, which the
// kube-engine needs to run an exec as another user and busybox's applet
// cannot stand in for.
func BusyboxWith(busybox, tag string, cmd []string, bins []string, w io.Writer) (manifests.Digest, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return manifests.Digest{}, err
	}
	var lb bytes.Buffer
	tw := tar.NewWriter(&lb)
	hdr := func(h *tar.Header) {
		h.ModTime = epoch
		tw.WriteHeader(h)
	}
	for _, d := range []string{"bin/", "etc/", "tmp/", "proc/", "dev/", "sys/", "root/"} {
		hdr(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	hdr(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
	hdr(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd))})
	tw.Write([]byte(passwd))
	for _, a := range []string{"sh", "cat", "echo", "sleep", "true", "id", "ls"} {
		hdr(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		return manifests.Digest{}, err
	}
	layerBytes := lb.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return manifests.Digest{}, err
	}
	layers := []v1.Layer{layer}
	if len(bins) > 0 {
		extra, err := hostFilesLayer(bins)
		if err != nil {
			return manifests.Digest{}, err
		}
		layers = append(layers, extra)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return manifests.Digest{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return manifests.Digest{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created.Time = epoch
	cf.Config.Cmd = cmd
	cf.Config.Env = []string{"PATH=/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return manifests.Digest{}, err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return manifests.Digest{}, err
	}
	cn, err := img.ConfigName()
	if err != nil {
		return manifests.Digest{}, err
	}
	id, err := manifests.ParseDigest(cn.String())
	if err != nil {
		return manifests.Digest{}, err
	}
	return id, tarball.Write(ref, img, w)
}

// hostFilesLayer is a layer of the binaries bins and the libraries they
// link, each at its path on this machine.
func hostFilesLayer(bins []string) (v1.Layer, error) {
	files := map[string]bool{}
	for _, b := range bins {
		files[b] = true
		out, err := exec.Command("ldd", b).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", b, err)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				files[f] = true
			}
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var lb bytes.Buffer
	tw := tar.NewWriter(&lb)
	dirs := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		in := strings.TrimPrefix(p, "/")
		var parents []string
		for d := filepath.Dir(in); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch})
		}
		tw.WriteHeader(&tar.Header{Name: in, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b)), ModTime: epoch})
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := lb.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
