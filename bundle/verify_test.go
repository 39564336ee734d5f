package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/manifests"
)

var testSource = manifests.BundleSource{
	Module:     Module,
	Version:    "0.1.0+g0123456789ab",
	Commit:     "0123456789abcdef0123456789abcdef01234567",
	Time:       time.Unix(1700000000, 0).UTC(),
	GoVersion:  "go1.26.8",
	BuildFlags: []string{"-trimpath"},
	BuildEnv:   []string{"CGO_ENABLED=0"},
	Platforms:  []string{"linux/amd64", "linux/arm64"},
}

var testFiles = map[string]string{
	"bin/linux-amd64/sealbench": "amd64 binary\x7fELF" + strings.Repeat("a", 300<<10),
	"bin/linux-arm64/sealbench": "arm64 binary\x7fELF" + strings.Repeat("b", 200<<10),
	"cells/C01.sh":              "echo one\n",
	"cells/C02.sh":              "echo two\n",
}

type keys struct {
	signer   *sign.Signer
	verifier *sign.Verifier
}

func newKeys(t testing.TB) keys {
	t.Helper()
	dir := t.TempDir()
	priv, pub, err := sign.WriteKeyPair(dir, []byte("pw"), false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return keys{s, v}
}

// makeBundle assembles a bundle from files through the same code Seal uses
// after its builds.
func makeBundle(t testing.TB, k keys, files map[string]string) *SealResult {
	t.Helper()
	out := t.TempDir()
	staged, err := os.MkdirTemp(out, ".seal-")
	if err != nil {
		t.Fatal(err)
	}
	for p, data := range files {
		full := filepath.Join(staged, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Assemble(staged, out, testSource, k.signer, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tarDir packs dir the way a careless or hostile tool might: whatever is
// there, symlinks and FIFOs included, under top/.
func tarDir(t *testing.T, dir, top string, extra func(tw *tar.Writer)) string {
	t.Helper()
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	out := filepath.Join(t.TempDir(), top+".tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top + "/", Mode: 0o755})
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			t.Fatal(err)
		}
		h.Name = top + "/" + filepath.ToSlash(must(filepath.Rel(dir, p)))
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			tw.Write(b)
		}
	}
	if extra != nil {
		extra(tw)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// outcome is what verification must say: a content problem (path and
// kind), or an error wrapping one of the sentinels.
type outcome struct {
	path, kind string
	sentinel   error
}

func checkOutcome(t *testing.T, res *VerifyResult, err error, want outcome) {
	t.Helper()
	if want.sentinel != nil {
		if !errors.Is(err, want.sentinel) {
			t.Fatalf("verify = %v, want an error wrapping %q", err, want.sentinel)
		}
		return
	}
	var ce *ContentError
	if !errors.As(err, &ce) {
		t.Fatalf("verify = (%v, %v), want a ContentError with %s: %s", res, err, want.path, want.kind)
	}
	for _, p := range ce.Problems {
		if p.Path == want.path && p.Kind == want.kind {
			return
		}
	}
	t.Fatalf("verify found %v, not %s: %s", ce.Problems, want.path, want.kind)
}

func TestVerifyGoodBundle(t *testing.T) {
	k := newKeys(t)
	b := makeBundle(t, k, testFiles)
	for _, p := range []string{b.Dir, b.Tar} {
		res, err := Verify(context.Background(), p, VerifyOptions{Verifier: k.verifier})
		if err != nil {
			t.Fatalf("Verify(%s): %v", p, err)
		}
		if res.Name != b.Name || res.Files != len(testFiles) || res.ManifestDigest != b.ManifestDigest {
			t.Errorf("Verify(%s) = %+v, want name %s with %d files", p, res, b.Name, len(testFiles))
		}
	}
	if !strings.HasPrefix(b.Name, "build-linux-") || len(b.Name) != len("build-linux-")+12 {
		t.Errorf("bundle name %q", b.Name)
	}
}

func TestVerifyTamperedBundle(t *testing.T) {
	k := newKeys(t)
	other := newKeys(t)
	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   outcome
	}{
		{"flipped byte in a binary", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, "bin/linux-amd64/sealbench"), 100<<10)
		}, outcome{path: "bin/linux-amd64/sealbench", kind: "digest"}},
		{"flipped byte in a cell body", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, "cells/C01.sh"), 0)
		}, outcome{path: "cells/C01.sh", kind: "digest"}},
		{"flipped byte in the manifest", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, manifests.ManifestFile), 40)
		}, outcome{sentinel: ErrSignature}},
		{"flipped byte in the signature", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, manifests.SignatureFile), 20)
		}, outcome{sentinel: ErrSignature}},
		{"signature removed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, manifests.SignatureFile))
		}, outcome{sentinel: ErrSignature}},
		{"truncated file", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, "bin/linux-arm64/sealbench"), 1000)
		}, outcome{path: "bin/linux-arm64/sealbench", kind: "size"}},
		{"extra file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "cells/C99.sh"), []byte("rm -rf /\n"), 0o644)
		}, outcome{path: "cells/C99.sh", kind: "extra"}},
		{"extra directory", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "lib"), 0o755)
		}, outcome{path: "lib/", kind: "extra"}},
		{"missing file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "cells/C02.sh"))
		}, outcome{path: "cells/C02.sh", kind: "missing"}},
		{"file swapped for a symlink", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "cells/C01.sh")
			outside := filepath.Join(t.TempDir(), "C01.sh")
			os.WriteFile(outside, []byte(testFiles["cells/C01.sh"]), 0o644)
			os.Remove(p)
			os.Symlink(outside, p)
		}, outcome{path: "cells/C01.sh", kind: "type"}},
		{"file swapped for a FIFO", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "cells/C02.sh")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, outcome{path: "cells/C02.sh", kind: "type"}},
		{"mode change", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, "cells/C01.sh"), 0o755)
		}, outcome{path: "cells/C01.sh", kind: "mode"}},
		{"SHA256SUMS changed", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, manifests.SumsFile), 3)
		}, outcome{path: manifests.SumsFile, kind: "sums"}},
		{"manifest signed by another key", func(t *testing.T, dir string) {
			mb, _ := os.ReadFile(filepath.Join(dir, manifests.ManifestFile))
			sig, _ := other.signer.SignManifest(mb)
			os.WriteFile(filepath.Join(dir, manifests.SignatureFile), sig, 0o644)
		}, outcome{sentinel: ErrSignature}},
		{"valid manifest from another bundle", func(t *testing.T, dir string) {
			files := map[string]string{}
			for p, d := range testFiles {
				files[p] = d
			}
			files["cells/C01.sh"] = "echo 1!!\n" // same size, other bytes
			b := makeBundle(t, k, files)
			for _, f := range []string{manifests.ManifestFile, manifests.SignatureFile, manifests.SumsFile} {
				data, _ := os.ReadFile(filepath.Join(b.Dir, f))
				os.WriteFile(filepath.Join(dir, f), data, 0o644)
			}
		}, outcome{path: "cells/C01.sh", kind: "digest"}},
		{"signed manifest with a ../ path", func(t *testing.T, dir string) {
			mb, _ := os.ReadFile(filepath.Join(dir, manifests.ManifestFile))
			mb = bytes.Replace(mb, []byte(`"cells/C01.sh"`), []byte(`"cells/../../C01.sh"`), 1)
			sig, _ := k.signer.SignManifest(mb)
			os.WriteFile(filepath.Join(dir, manifests.ManifestFile), mb, 0o644)
			os.WriteFile(filepath.Join(dir, manifests.SignatureFile), sig, 0o644)
		}, outcome{sentinel: ErrUnusable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := makeBundle(t, k, testFiles)
			tt.tamper(t, b.Dir)
			t.Run("dir", func(t *testing.T) {
				res, err := Verify(context.Background(), b.Dir, VerifyOptions{Verifier: k.verifier})
				checkOutcome(t, res, err, tt.want)
			})
			t.Run("tar", func(t *testing.T) {
				tarPath := tarDir(t, b.Dir, b.Name, nil)
				res, err := Verify(context.Background(), tarPath, VerifyOptions{Verifier: k.verifier})
				checkOutcome(t, res, err, tt.want)
			})
		})
	}
}

func TestVerifyMixAndMatchName(t *testing.T) {
	k := newKeys(t)
	a := makeBundle(t, k, testFiles)
	files := map[string]string{"cells/C01.sh": "x\n"}
	b := makeBundle(t, k, files)
	// b's complete, valid contents under a's name.
	renamed := filepath.Join(t.TempDir(), a.Name)
	if err := os.Rename(b.Dir, renamed); err != nil {
		t.Fatal(err)
	}
	_, err := VerifyDir(context.Background(), renamed, VerifyOptions{Verifier: k.verifier})
	checkOutcome(t, nil, err, outcome{path: a.Name, kind: "name"})
	// Under a neutral name (as installed at /opt/sealbench) it verifies.
	neutral := filepath.Join(t.TempDir(), "sealbench")
	os.Rename(renamed, neutral)
	if _, err := VerifyDir(context.Background(), neutral, VerifyOptions{Verifier: k.verifier}); err != nil {
		t.Errorf("a bundle under a neutral name: %v", err)
	}
}

func TestVerifyWithoutKey(t *testing.T) {
	k := newKeys(t)
	b := makeBundle(t, k, testFiles)
	if _, err := Verify(context.Background(), b.Dir, VerifyOptions{}); !errors.Is(err, ErrSignature) {
		t.Errorf("Verify with no verifier = %v, want ErrSignature", err)
	}
}

func TestVerifyNotABundle(t *testing.T) {
	k := newKeys(t)
	dir := t.TempDir()
	notTar := filepath.Join(dir, "x.tar")
	os.WriteFile(notTar, []byte("not a tar at all, but long enough to be read as one? no."), 0o644)
	for _, p := range []string{dir, notTar, filepath.Join(dir, "absent")} {
		if _, err := Verify(context.Background(), p, VerifyOptions{Verifier: k.verifier}); !errors.Is(err, ErrUnusable) {
			t.Errorf("Verify(%s) = %v, want ErrUnusable", p, err)
		}
	}
}

func TestVerifyHostileTar(t *testing.T) {
	k := newKeys(t)
	b := makeBundle(t, k, testFiles)
	file := func(name, data string) func(tw *tar.Writer) {
		return func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))})
			tw.Write([]byte(data))
		}
	}
	tests := []struct {
		name  string
		extra func(tw *tar.Writer)
		want  outcome
	}{
		{"entry with ../", file(b.Name+"/../evil", "x"), outcome{path: b.Name + "/../evil", kind: "path"}},
		{"absolute entry", file("/etc/evil", "x"), outcome{path: "/etc/evil", kind: "path"}},
		{"entry outside the top directory", file("other/evil", "x"), outcome{path: "other/evil", kind: "path"}},
		{"duplicate entry", file(b.Name+"/cells/C01.sh", "echo evil\n"), outcome{path: "cells/C01.sh", kind: "duplicate"}},
		{"hard link", func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: b.Name + "/cells/C03.sh", Linkname: "/etc/shadow"})
		}, outcome{path: "cells/C03.sh", kind: "type"}},
		{"symlink out of the bundle", func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: b.Name + "/cells/C04.sh", Linkname: "../../../etc/passwd"})
		}, outcome{path: "cells/C04.sh", kind: "type"}},
		{"device", func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeChar, Name: b.Name + "/cells/null", Devmajor: 1, Devminor: 3})
		}, outcome{path: "cells/null", kind: "type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tarDir(t, b.Dir, b.Name, tt.extra)
			res, err := VerifyTar(context.Background(), p, VerifyOptions{Verifier: k.verifier})
			checkOutcome(t, res, err, tt.want)
		})
	}
}

// TestVerifyStopsAtDeclaredSize: a file far larger than declared is
// neither read to its end nor accepted.
func TestVerifyStopsAtDeclaredSize(t *testing.T) {
	k := newKeys(t)
	b := makeBundle(t, k, testFiles)
	// The file holds 64 MiB where the manifest says 9 bytes.
	big := strings.Repeat("z", 64<<20)
	bigDir := filepath.Join(t.TempDir(), b.Name)
	os.Rename(b.Dir, bigDir)
	os.WriteFile(filepath.Join(bigDir, "cells/C01.sh"), []byte(big), 0o644)
	tarPath := tarDir(t, bigDir, b.Name, nil)
	_, err := VerifyTar(context.Background(), tarPath, VerifyOptions{Verifier: k.verifier})
	checkOutcome(t, nil, err, outcome{path: "cells/C01.sh", kind: "size"})
	_, err = VerifyDir(context.Background(), bigDir, VerifyOptions{Verifier: k.verifier})
	checkOutcome(t, nil, err, outcome{path: "cells/C01.sh", kind: "size"})
}

// TestVerifyPinnedName: a validly signed bundle that is not the pinned one
// (an older bundle offered in its place) is refused.
func TestVerifyPinnedName(t *testing.T) {
	k := newKeys(t)
	old := makeBundle(t, k, map[string]string{"cells/C01.sh": "echo old\n"})
	cur := makeBundle(t, k, testFiles)
	for _, p := range []string{old.Dir, old.Tar} {
		if _, err := Verify(context.Background(), p, VerifyOptions{Verifier: k.verifier, Expect: cur.Name}); !errors.Is(err, ErrNotPinned) || !strings.Contains(err.Error(), cur.Name) {
			t.Errorf("Verify(%s) pinned to %s: %v, want ErrNotPinned", p, cur.Name, err)
		}
	}
	if _, err := Verify(context.Background(), cur.Tar, VerifyOptions{Verifier: k.verifier, Expect: cur.Name}); err != nil {
		t.Errorf("the pinned bundle itself: %v", err)
	}
}

// TestVerifyRefusesDamagedTar: a tar cut short (between two entries, as an
// interrupted copy leaves it, or inside one), a second archive appended
// after the end marker, and a compressed tar are each refused as
// unusable, named for what they are, before any signature is looked at.
func TestVerifyRefusesDamagedTar(t *testing.T) {
	k := newKeys(t)
	b := makeBundle(t, k, testFiles)
	whole, err := os.ReadFile(b.Tar)
	if err != nil {
		t.Fatal(err)
	}
	// A cut at the last entry's header (manifest.sig's, which starts with
	// its name) leaves whole entries only, and no end marker.
	lastHeader := bytes.Index(whole, []byte(b.Name+"/"+manifests.SignatureFile+"\x00"))
	other := makeBundle(t, k, map[string]string{"cells/C99.sh": "echo appended\n"})
	appended, _ := os.ReadFile(other.Tar)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(whole)
	zw.Close()
	padded := append(bytes.Clone(whole), make([]byte, 10240)...) // GNU tar pads records with zeros: fine
	tests := []struct {
		name string
		data []byte
		want string // "" verifies
	}{
		{"cut between entries", whole[:lastHeader], "truncated"},
		{"cut at a 4 KiB boundary", whole[:len(whole)/4096*4096], "truncated"},
		{"cut inside an entry", whole[:lastHeader+600], "truncated"},
		{"second archive appended", append(bytes.Clone(whole), appended...), "follow the end-of-archive marker"},
		{"gzipped", gz.Bytes(), "gzip-compressed"},
		{"zero padding after the end", padded, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), b.Name+".tar")
			if err := os.WriteFile(p, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := VerifyTar(context.Background(), p, VerifyOptions{Verifier: k.verifier})
			var te *TarError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("VerifyTar = %v, want success", err)
			case tt.want == "":
			case !errors.As(err, &te) || !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), tt.want) || te.Hint() == "":
				t.Errorf("VerifyTar = %v, want a TarError (ErrUnusable) saying %q, with a hint", err, tt.want)
			}
		})
	}
}
