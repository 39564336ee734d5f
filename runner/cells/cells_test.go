package cells

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// The digests the cells' verifiers expect. Pinned, because a change to the
// base generator changes what C09-C11 measure.
const (
	wantBaseDigest  = "sha256:" + "15965b6a75c5b4c244e9d8512e3fdef0fa74d84ec09a645896aec0f896a05170"
	wantZerosDigest = "sha256:" + "3b6a07d0d404fab4e23b6d34bc6696a6a312dd92821332385e5af7c01c421351"
)

func TestBaseAndZerosDigests(t *testing.T) {
	if got := BaseDigest().String(); got != wantBaseDigest {
		t.Errorf("BaseDigest = %s, want %s (the base generator changed: results before and after are not comparable)", got, wantBaseDigest)
	}
	if got := ZerosDigest().String(); got != wantZerosDigest {
		t.Errorf("ZerosDigest = %s, want %s", got, wantZerosDigest)
	}
	// SplitMix64's published first outputs for seed 0.
	sm := &splitMix64{}
	for _, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := sm.next(); got != want {
			t.Errorf("splitMix64 from 0: %#x, want %#x", got, want)
		}
	}
	// Reads of any size give the same stream.
	a, _ := io.ReadAll(io.LimitReader(BaseReader(), 1000))
	var b []byte
	r := BaseReader()
	for len(b) < 1000 {
		p := make([]byte, 3+len(b)%11)
		n, _ := r.Read(p)
		b = append(b, p[:n]...)
	}
	if !bytes.Equal(a, b[:1000]) {
		t.Error("BaseReader gives different bytes for different read sizes")
	}
}

// TestRegistryMatchesCellFiles holds the registry and cells/ to each other:
// every body file is registered, and every registered body exists.
func TestRegistryMatchesCellFiles(t *testing.T) {
	files, err := fs.Glob(bodies, "*.sh")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, f := range files {
		onDisk = append(onDisk, filepath.Base(f))
	}
	var registered []string
	for _, name := range Names() {
		c := All[name]
		if c.Name != name || c.Body != name+".sh" || c.Title == "" {
			t.Errorf("cell %s is registered as %+v", name, c)
		}
		registered = append(registered, c.Body)
	}
	sort.Strings(onDisk)
	if strings.Join(onDisk, ",") != strings.Join(registered, ",") {
		t.Errorf("cells/ holds %v, the registry names %v", onDisk, registered)
	}
	if len(All) != 12 {
		t.Errorf("%d cells, want 12", len(All))
	}
}

func TestLookupAndParseCells(t *testing.T) {
	var uce *UnknownError
	if _, err := Lookup("C13"); !errors.As(err, &uce) || !strings.Contains(err.Error(), "C01..C12") {
		t.Errorf("Lookup(C13) = %v", err)
	}
	if got, err := Parse("c01, C09"); err != nil || strings.Join(got, ",") != "C01,C09" {
		t.Errorf("Parse = %v, %v", got, err)
	}
	if got, _ := Parse(""); len(got) != 12 {
		t.Errorf("Parse(\"\") = %v", got)
	}
	for _, bad := range []string{"C01,C01", "C00", "C01,"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}

// TestCells runs every cell's body for real with /bin/sh in a plain
// directory (its base in place), requires its verifier to pass, then
// tampers with the result in two ways and requires the verifier to fail.
func TestCells(t *testing.T) {
	testenv.Short(t, "runs all twelve bodies, writing 64 MiB files")
	testenv.NeedCommand(t, "git")
	ctx := context.Background()
	for _, name := range Names() {
		c := All[name]
		t.Run(name, func(t *testing.T) {
			here, err := filepath.Abs(".")
			if err != nil {
				t.Fatal(err)
			}
			stdout, res, dir := runCell(t, c, here)
			if name == "C01" && (res.Files != 1000 || res.Bytes != 8893) {
				t.Errorf("C01 inventory: %d files, %d bytes; want 1000, 8893", res.Files, res.Bytes)
			}
			if name == "C07" && (res.Files != 2 || res.Bytes != 2*BaseSize) {
				t.Errorf("C07 inventory: %d files, %d bytes", res.Files, res.Bytes)
			}
			if name == "C05" || name == "C09" {
				bad := bytes.Replace(stdout, []byte("1"), []byte("2"), 1)
				if res, err := c.Verifier().Verify(ctx, LocalShell{Dir: dir}, bad); err != nil || res.Pass {
					t.Errorf("verifier passed a changed stdout: %+v, %v", res, err)
				}
			}
		})
	}
}

// runCell runs c for real with /bin/sh in a fresh directory, as the
// native reference runs it: its base file, its setup and its body, from
// the scripts in scripts. It requires the verifier to pass there, then
// tampers with the result in two ways (a byte changed, a file removed)
// and requires the verifier to fail each time. It returns the body's
// stdout, the verification and the directory.
func runCell(t *testing.T, c *Cell, scripts string) ([]byte, Verification, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if c.Base == BaseFile {
		if err := WriteBase(dir); err != nil {
			t.Fatal(err)
		}
	}
	sh := LocalShell{Dir: dir}
	if c.Setup != "" {
		if _, err := sh.Sh(ctx, BodyScript(filepath.Join(scripts, c.Setup)), nil); err != nil {
			t.Fatalf("running the setup: %v", err)
		}
	}
	stdout, err := sh.Sh(ctx, BodyScript(filepath.Join(scripts, c.Body)), nil)
	if err != nil {
		t.Fatalf("running the body: %v", err)
	}
	v := c.Verifier()
	res, err := v.Verify(ctx, sh, stdout)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass {
		t.Fatalf("verifier failed on the body's own result: %s", res.Detail)
	}
	for _, tamper := range []string{"change a byte", "delete a file"} {
		snapshot := copyTree(t, dir)
		what := tamperWith(t, snapshot, tamper)
		res, err := v.Verify(ctx, LocalShell{Dir: snapshot}, stdout)
		if err != nil {
			t.Fatal(err)
		}
		if res.Pass {
			t.Errorf("verifier passed after %s", what)
		} else {
			t.Logf("after %s: %s", what, res.Detail)
		}
	}
	return stdout, res, dir
}

// tamperWith changes the first regular file outside .git in dir: one byte
// changed (or added, to an empty file), or the file removed. In a cell
// that leaves no files, it adds one.
func tamperWith(t *testing.T, dir, how string) string {
	t.Helper()
	var victim string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || victim != "" {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			victim = p
		}
		return nil
	})
	if victim == "" {
		if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return "adding a stray file"
	}
	rel, _ := filepath.Rel(dir, victim)
	if how == "delete a file" {
		if err := os.Remove(victim); err != nil {
			t.Fatal(err)
		}
		return "deleting " + rel
	}
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		b = []byte{'x'}
	} else {
		b[len(b)/2] ^= 0x01
	}
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return "changing a byte of " + rel
}

// copyTree copies dir to a new temporary directory, so that each tamper
// starts from the body's own result.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copying %s: %v", dir, err)
	}
	return dst
}
