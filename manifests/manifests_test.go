package manifests

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

// wantProblems checks that err is a *ValidationError naming each field.
func wantProblems(t *testing.T, err error, fields ...string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate: %v, want a *ValidationError", err)
	}
	named := map[string]bool{}
	for _, p := range ve.Problems {
		named[p.Field] = true
	}
	for _, f := range fields {
		if !named[f] {
			t.Errorf("no problem named %s in:\n%v", f, err)
		}
	}
}

func sampleManifest() *BundleManifest {
	return &BundleManifest{
		SchemaVersion: BundleSchemaVersion,
		Kind:          BundleKind,
		Source: BundleSource{
			Module:     "github.com/sealbench/sealbench",
			Version:    "0.1.0+g0123456789ab",
			Commit:     "0123456789abcdef0123456789abcdef01234567",
			Time:       time.Unix(1700000000, 0).UTC(),
			GoVersion:  "go1.26.8",
			BuildFlags: []string{"-trimpath", "-buildvcs=false"},
			BuildEnv:   []string{"CGO_ENABLED=0"},
			Platforms:  []string{"linux/amd64", "linux/arm64"},
		},
		Files: []BundleFile{
			{Path: "bin/linux-amd64/sealbench", Size: 5, Mode: 0o755, Digest: DigestOf([]byte("amd64"))},
			{Path: "bin/linux-arm64/sealbench", Size: 5, Mode: 0o755, Digest: DigestOf([]byte("arm64"))},
			{Path: "cells/C01.sh", Size: 4, Mode: 0o644, Digest: DigestOf([]byte("c01\n"))},
		},
	}
}

func TestManifestGolden(t *testing.T) {
	m := sampleManifest()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, "manifest.golden.json", b)
	testenv.Golden(t, "SHA256SUMS.golden", m.SHA256SUMS())
	if got, want := BundleName(b), BundleNamePrefix+DigestOf(b).Hex[:12]; got != want {
		t.Errorf("BundleName = %s, want %s", got, want)
	}

	back, err := ParseBundleManifest(b)
	if err != nil {
		t.Fatalf("parsing what Marshal wrote: %v", err)
	}
	if f, ok := back.File("cells/C01.sh"); !ok || f.Size != 4 || f.Mode != 0o644 {
		t.Errorf("File(cells/C01.sh) = %+v, %v", f, ok)
	}
	if _, ok := back.File("cells/C02.sh"); ok {
		t.Error("File found a path the manifest does not list")
	}
	if got := strings.Join(back.Dirs(), ","); got != "bin,bin/linux-amd64,bin/linux-arm64,cells" {
		t.Errorf("Dirs = %s", got)
	}
}

func TestParseBundleManifestRejects(t *testing.T) {
	good, err := sampleManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("sample manifest lacks %q", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"dotdot path", edit(`"cells/C01.sh"`, `"cells/../../etc/passwd"`), `contains ".."`},
		{"absolute path", edit(`"cells/C01.sh"`, `"/etc/passwd"`), "is absolute"},
		{"NUL in path", edit(`"cells/C01.sh"`, `"cells/C01\u0000.sh"`), "NUL"},
		{"newline in path", edit(`"cells/C01.sh"`, `"cells/C01\n.sh"`), "newline"},
		{"backslash in path", edit(`"cells/C01.sh"`, `"cells\\C01.sh"`), "backslash"},
		{"empty element", edit(`"cells/C01.sh"`, `"cells//C01.sh"`), "not clean"},
		{"reserved name", edit(`"cells/C01.sh"`, `"manifest.sig"`), "reserved"},
		{"unknown field", edit(`"kind":`, `"extra": 1, "kind":`), "unknown field"},
		{"trailing data", append(append([]byte{}, good...), []byte("{}")...), "trailing data"},
		{"newer schema", edit(`"schemaVersion": 1`, `"schemaVersion": 7`), "newer than"},
		{"wrong kind", edit(`"sealbench.bundle"`, `"other"`), "kind"},
		{"bad digest", edit(DigestOf([]byte("amd64")).Hex, strings.ToUpper(DigestOf([]byte("amd64")).Hex)), "lowercase"},
		{"negative size", edit(`"size": 4`, `"size": -4`), "outside"},
		{"setuid mode", edit(`"mode": "0755"`, `"mode": "4755"`), "mode"},
		{"duplicate key", edit(`"kind": "sealbench.bundle",`, `"kind": "sealbench.bundle", "kind": "sealbench.bundle",`), "canonical"},
		{"not canonical", bytes.ReplaceAll(good, []byte("  "), []byte("\t")), "canonical"},
		{"not JSON", []byte("hello"), "parsing manifest"},
		{"too large", make([]byte, MaxManifestSize+1), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBundleManifest(tt.in)
			if err == nil {
				t.Fatal("ParseBundleManifest accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	m := sampleManifest()
	m.SchemaVersion = 0
	m.Source.Module = ""
	m.Source.Commit = "xyz"
	m.Files[0].Path = "../a"
	m.Files[1].Size = -1
	m.Files = append(m.Files, BundleFile{Path: "cells/C01.sh", Size: 1, Mode: 0o644, Digest: DigestOf(nil)})
	wantProblems(t, m.Validate(), "schemaVersion", "source.module", "source.commit", "files[0].path", "files[1].size", "files[3].path")
}

func TestValidateFileAndDirectoryConflict(t *testing.T) {
	m := sampleManifest()
	m.Files = append([]BundleFile{{Path: "bin", Size: 0, Mode: 0o644, Digest: DigestOf(nil)}}, m.Files...)
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "also the directory") {
		t.Errorf("Validate = %v, want a file/directory conflict", err)
	}
}

func TestHashFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, d, err := HashFile(p); err != nil || n != 5 || d != DigestOf([]byte("hello")) {
		t.Errorf("HashFile = %d, %s, %v; want 5 and the digest of hello", n, d, err)
	}
	if _, _, err := HashFile(p + ".missing"); !os.IsNotExist(err) {
		t.Errorf("HashFile of a missing file: %v, want not-exist", err)
	}
}

func TestDigest(t *testing.T) {
	d := DigestOf([]byte("hello"))
	if d.String() != "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("DigestOf(hello) = %s", d)
	}
	p, err := ParseDigest(d.String())
	if err != nil || p != d {
		t.Fatalf("ParseDigest(%s) = %v, %v", d, p, err)
	}
	for _, bad := range []string{"", "sha256", "sha256:", "md5:" + d.Hex, "sha256:" + d.Hex[:10], "sha256:" + strings.ToUpper(d.Hex), "sha256:" + d.Hex + "00", "sha256:" + strings.Repeat("g", 64)} {
		if _, err := ParseDigest(bad); err == nil {
			t.Errorf("ParseDigest(%q) accepted it", bad)
		}
	}
	if _, err := (Digest{}).MarshalText(); err == nil {
		t.Error("the zero Digest marshalled")
	}
}

// endless is a reader that never ends.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	e.n += int64(len(p))
	return len(p), nil
}

func TestVerifyingReader(t *testing.T) {
	data := []byte("0123456789")
	want := DigestOf(data)
	read := func(r io.Reader, size int64, d Digest) error {
		_, err := io.Copy(io.Discard, NewVerifyingReader(r, size, d))
		return err
	}
	if err := read(bytes.NewReader(data), 10, want); err != nil {
		t.Errorf("exact content: %v", err)
	}
	var me *MismatchError
	if err := read(bytes.NewReader(data[:9]), 10, want); !errors.As(err, &me) || me.Field != "size" {
		t.Errorf("short content: %v, want a size mismatch", err)
	}
	if err := read(bytes.NewReader(append(data, 'x')), 10, want); !errors.As(err, &me) || me.Field != "size" {
		t.Errorf("long content: %v, want a size mismatch", err)
	}
	if err := read(bytes.NewReader([]byte("0123456780")), 10, want); !errors.As(err, &me) || me.Field != "digest" {
		t.Errorf("changed content: %v, want a digest mismatch", err)
	}
	// An endless source stops just past the declared size.
	e := &endless{}
	if err := read(e, 1<<20, want); !errors.As(err, &me) || me.Field != "size" {
		t.Errorf("endless content: %v, want a size mismatch", err)
	}
	if e.n > 1<<20+64<<10 {
		t.Errorf("read %d bytes of an endless source declared as %d", e.n, 1<<20)
	}
}

func FuzzParseBundleManifest(f *testing.F) {
	good, err := sampleManifest().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"schemaVersion":1}`))
	f.Add([]byte(`{"files":[{"path":"../x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseBundleManifest(b)
		if err != nil {
			return
		}
		// Whatever parses is valid, canonical, and names only safe paths.
		if err := m.Validate(); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		again, err := m.Marshal()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("parsed but not canonical")
		}
		for _, f := range m.Files {
			if ValidateBundlePath(f.Path) != nil || strings.Contains(f.Path, "..") && strings.Contains("/"+f.Path+"/", "/../") {
				t.Fatalf("unsafe path %q accepted", f.Path)
			}
		}
	})
}

func TestPackageLock(t *testing.T) {
	good := `{"schemaVersion":1,"kind":"sealbench.packages","name":"sandbox","arch":"amd64",
"spec":{"roots":["dash"],"exclude":[]},"time":"2026-11-29T00:00:00Z",
"packages":[{"name":"dash","version":"0.5.12-2","arch":"amd64","filename":"pool/main/d/dash/dash_0.5.12-2_amd64.deb","size":91848,
"sha256":"` + DigestOf([]byte("x")).String() + `"}]}`
	l, err := ParsePackageLock([]byte(good))
	if err != nil {
		t.Fatalf("a good lock: %v", err)
	}
	if b, err := l.Marshal(); err != nil || !bytes.Contains(b, []byte(`"name": "dash"`)) {
		t.Errorf("Marshal: %s, %v", b, err)
	}
	bad := strings.NewReplacer(`"arch":"amd64",`+"\n", `"arch":"AMD 64",`+"\n", `"version":"0.5.12-2"`, `"version":"0.5 12"`,
		`"size":91848`, `"size":0`, `"roots":["dash"]`, `"roots":["dash","git"]`).Replace(good)
	_, err = ParsePackageLock([]byte(bad))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("a bad lock: %v", err)
	}
	for _, f := range []string{"arch", "packages[0].version", "packages[0].size", "spec.roots[1]"} {
		if !strings.Contains(err.Error(), f+":") {
			t.Errorf("Validate did not name %s:\n%v", f, err)
		}
	}
	if _, err := ParsePackageLock([]byte(strings.Replace(good, `"schemaVersion":1`, `"schemaVersion":9`, 1))); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("a newer lock: %v", err)
	}
}
