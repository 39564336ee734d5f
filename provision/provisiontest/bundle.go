package provisiontest

// What provisioning tests need: a signed bundle holding a freshly built
// stand-in (as a sealed bundle would, but without building every part for
// every platform), and a small Sandbox image tar (busybox) with its
// identity file, next to the bundle where seal puts them.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/vmimages"
)

// Bundle is a signed bundle with its key and Sandbox image.
type Bundle struct {
	Dir     string // build-linux-<hash>
	Name    string
	PubKey  string
	Standin manifests.Digest // of bin/linux-<arch>/standin
	Image   engine.Image
	// Manifest is the bundle's manifest, as signed.
	Manifest *manifests.BundleManifest
}

// ImageRef is the tag the test image loads under.
const ImageRef = "sealbench/sandbox-test:busybox"

var (
	once     sync.Once
	shared   *Bundle
	dirs     []string
	err      error
	mainUsed bool

	runnerOnce   sync.Once
	runnerShared *Bundle
	runnerErr    error
)

// Main runs the tests and removes what GetBundle and GetRunnerBundle made.
// m is a *testing.M, or what runs one and more around it (kubetest.Main).
func Main(m interface{ Run() int }) {
	mainUsed = true
	code := m.Run()
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// GetBundle returns the bundle, making it on first use (it needs go and
// busybox; the stand-in is built once per test binary).
func GetBundle(t testing.TB) *Bundle {
	t.Helper()
	return getBundle(t, false, &once, &shared, &err)
}

// GetRunnerBundle returns a bundle that also holds the runner for this
// host (bin/linux-<arch>/sealbench, built as a bundle's is), for tests
// that take samples through `run`.
func GetRunnerBundle(t testing.TB) *Bundle {
	t.Helper()
	return getBundle(t, true, &runnerOnce, &runnerShared, &runnerErr)
}

func getBundle(t testing.TB, withRunner bool, once *sync.Once, shared **Bundle, errp *error) *Bundle {
	t.Helper()
	testenv.Short(t, "builds the stand-in and a Sandbox image")
	goCmd := testenv.NeedCommand(t, "go")
	bb := testenv.NeedCommand(t, "busybox")
	if !mainUsed {
		// No Main to clean up after a shared bundle: make one for this test.
		b, err := makeBundle(goCmd, bb, t.TempDir(), withRunner)
		if err != nil {
			t.Fatalf("making the test bundle: %v", err)
		}
		return b
	}
	once.Do(func() {
		var d string
		if d, *errp = os.MkdirTemp("", "sealbench-testbundle-"); *errp == nil {
			dirs = append(dirs, d)
			*shared, *errp = makeBundle(goCmd, bb, d, withRunner)
		}
	})
	if *errp != nil {
		t.Fatalf("making the test bundle: %v", *errp)
	}
	return *shared
}

func makeBundle(goCmd, busybox, dir string, withRunner bool) (*Bundle, error) {
	root, err := bundle.FindModuleRoot(".")
	if err != nil {
		return nil, err
	}
	staged := filepath.Join(dir, "staged")
	binRel := "bin/linux-" + runtime.GOARCH + "/standin"
	runnerRel := bundle.RunnerPath("linux", runtime.GOARCH)
	bin := filepath.Join(staged, filepath.FromSlash(binRel))
	pkgs := []string{"./cmd/standin"}
	if withRunner {
		pkgs = append(pkgs, "./cmd/sealbench")
	}
	cmd := exec.Command(goCmd, append([]string{"build", "-trimpath", "-tags", bundle.ShippedBuildTags, "-o", filepath.Dir(bin) + "/"}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, &buildError{err, out}
	}
	if err := os.MkdirAll(filepath.Join(staged, "cells"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staged, "cells", "C01.sh"), []byte("echo one\n"), 0o644); err != nil {
		return nil, err
	}
	m := &manifests.BundleManifest{SchemaVersion: manifests.BundleSchemaVersion, Kind: manifests.BundleKind, Source: manifests.BundleSource{
		Module: bundle.Module, Version: "0.1.0+g0123456789ab", Commit: "0123456789abcdef0123456789abcdef01234567",
		Time: time.Unix(1700000000, 0).UTC(), GoVersion: runtime.Version(), BuildFlags: []string{"-trimpath"},
		BuildEnv: []string{"CGO_ENABLED=0"}, Platforms: []string{"linux/" + runtime.GOARCH},
	}}
	var standin manifests.Digest
	type file struct {
		rel  string
		mode manifests.FileMode
	}
	files := []file{{binRel, 0o755}, {"cells/C01.sh", 0o644}}
	if withRunner {
		files = append(files, file{runnerRel, 0o755})
	}
	for _, f := range files {
		p := filepath.Join(staged, filepath.FromSlash(f.rel))
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(p, os.FileMode(f.mode)); err != nil {
			return nil, err
		}
		d := manifests.DigestOf(b)
		if f.rel == binRel {
			standin = d
		}
		m.Files = append(m.Files, manifests.BundleFile{Path: f.rel, Size: int64(len(b)), Mode: f.mode, Digest: d})
	}
	m.SortFiles()
	mb, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	priv, pub, err := sign.WriteKeyPair(filepath.Join(dir, "keys"), []byte("pw"), false)
	if err != nil {
		return nil, err
	}
	signer, err := sign.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		return nil, err
	}
	sig, err := signer.SignManifest(mb)
	if err != nil {
		return nil, err
	}
	for n, b := range map[string][]byte{manifests.ManifestFile: mb, manifests.SignatureFile: sig, manifests.SumsFile: m.SHA256SUMS()} {
		if err := os.WriteFile(filepath.Join(staged, n), b, 0o644); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{staged, filepath.Join(staged, "bin"), filepath.Dir(bin), filepath.Join(staged, "cells")} {
		os.Chmod(d, 0o755)
	}
	bname := manifests.BundleName(mb)
	final := filepath.Join(dir, bname)
	if err := os.Rename(staged, final); err != nil {
		return nil, err
	}
	img, err := writeImage(busybox, filepath.Join(dir, bname+".image"))
	if err != nil {
		return nil, err
	}
	return &Bundle{Dir: final, Name: bname, PubKey: pub, Standin: standin, Image: img, Manifest: m}, nil
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "building the stand-in (and runner): " + e.err.Error() + "\n" + string(e.out)
}

// writeImage writes a busybox root filesystem as `docker save` would
// (testimage.Busybox), into dir/sandbox-image.tar, as the Sandbox image
// stands in.
func writeImage(busybox, dir string) (engine.Image, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return engine.Image{}, err
	}
	p := filepath.Join(dir, vmimages.SandboxTar)
	f, err := os.Create(p)
	if err != nil {
		return engine.Image{}, err
	}
	defer f.Close()
	id, err := testimage.Busybox(busybox, ImageRef, f)
	if err != nil {
		return engine.Image{}, err
	}
	if err := f.Close(); err != nil {
		return engine.Image{}, err
	}
	// The fields of vmimages.ImageInfo that provisioning reads.
	info, err := json.Marshal(map[string]any{"ref": ImageRef, "id": id, "bundle": filepath.Base(strings.TrimSuffix(dir, ".image")), "tar": p})
	if err != nil {
		return engine.Image{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, vmimages.SandboxInfo), info, 0o644); err != nil {
		return engine.Image{}, err
	}
	return engine.Image{Tar: p, Ref: ImageRef, ID: id}, nil
}
