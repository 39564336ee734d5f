package attest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

func testSealed() Sealed {
	d := manifests.DigestOf
	return Sealed{
		Name: "build-linux-0123456789ab",
		Manifest: &manifests.BundleManifest{
			Source: manifests.BundleSource{Module: "github.com/sealbench/sealbench", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
			Files: []manifests.BundleFile{
				{Path: "bin/linux-amd64/sealbench", Digest: d([]byte("runner"))},
				{Path: "cells/C01.sh", Digest: d([]byte("echo one\n"))},
			},
		},
		Meta:  map[string]manifests.Digest{manifests.ManifestFile: d([]byte("m")), manifests.SignatureFile: d([]byte("s")), manifests.SumsFile: d([]byte("u"))},
		Tar:   d([]byte("tar")),
		Image: &Image{Ref: "sealbench/sandbox:build-linux-0123456789ab", Config: d([]byte("config")), Arch: "amd64", Lock: "vmimages/locks/sandbox-amd64.json", LockDigest: d([]byte("lock"))},
		Start: time.Unix(1, 0), End: time.Unix(2, 0),
	}
}

// TestCheckSeal: the provenance's subjects match exactly what it was made
// from; a file changed, added or gone, a changed tar, and another
// predicate are each a problem naming the subject.
func TestCheckSeal(t *testing.T) {
	s := testSealed()
	st, err := SealStatement(s)
	if err != nil {
		t.Fatal(err)
	}
	files := BundleFiles(s.Manifest, s.Meta)
	c := CheckSeal(st, s.Name, files, &s.Tar)
	if len(c.Problems) != 0 || c.Subjects != 7 || c.Checked != 6 || len(c.Unchecked) != 1 || c.Unchecked[0] != s.Image.Ref {
		t.Fatalf("a matching bundle: %+v", c)
	}
	if c.Image == nil || c.Image.Ref != s.Image.Ref || c.Image.Config != s.Image.Config {
		t.Errorf("the image subject: %+v, want %s %s", c.Image, s.Image.Ref, s.Image.Config)
	}
	if c := CheckSeal(st, s.Name, files, nil); len(c.Problems) != 0 || len(c.Unchecked) != 2 {
		t.Errorf("without the tar at hand: %+v", c)
	}

	for _, tt := range []struct {
		name    string
		change  func(files map[string]manifests.Digest, tar *manifests.Digest)
		subject string
	}{
		{"a changed file", func(f map[string]manifests.Digest, _ *manifests.Digest) {
			f["cells/C01.sh"] = manifests.DigestOf([]byte("x"))
		}, "cells/C01.sh"},
		{"an added file", func(f map[string]manifests.Digest, _ *manifests.Digest) {
			f["cells/C02.sh"] = manifests.DigestOf([]byte("x"))
		}, "cells/C02.sh"},
		{"a file gone", func(f map[string]manifests.Digest, _ *manifests.Digest) { delete(f, manifests.SignatureFile) }, manifests.SignatureFile},
		{"a changed tar", func(_ map[string]manifests.Digest, tar *manifests.Digest) { *tar = manifests.DigestOf([]byte("x")) }, s.Name + ".tar"},
	} {
		f := BundleFiles(s.Manifest, s.Meta)
		tar := s.Tar
		tt.change(f, &tar)
		c := CheckSeal(st, s.Name, f, &tar)
		if len(c.Problems) != 1 || c.Problems[0].Subject != tt.subject {
			t.Errorf("%s: %+v", tt.name, c.Problems)
		}
	}
	// Another bundle's name: its tar subject is not this one's.
	if c := CheckSeal(st, "build-linux-ba9876543210", files, nil); len(c.Problems) == 0 {
		t.Error("the provenance of build-linux-0123456789ab passes for another bundle")
	}
	st.PredicateType = ResultsPredicateType
	if c := CheckSeal(st, s.Name, files, &s.Tar); len(c.Problems) != 1 || c.Problems[0].Subject != "predicateType" {
		t.Errorf("another predicate: %+v", c.Problems)
	}
}

// TestResultsStatement: the predicate is made from the bytes it attests,
// and CheckResults names each difference.
func TestResultsStatement(t *testing.T) {
	run := filepath.Join("..", "..", "runner", "report", "testdata", "run")
	samples, err := os.ReadFile(filepath.Join(run, manifests.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	pins, err := os.ReadFile(filepath.Join(run, manifests.PinsFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ResultsStatement(samples, pins, manifests.DigestOf([]byte("m")), Audit{Verdict: AuditClean}, time.Unix(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	r, problems := CheckResults(st, manifests.DigestOf(samples), manifests.DigestOf(pins), "run-20261130T100000Z")
	if len(problems) != 0 || r.RunID != "run-20261130T100000Z" || r.Samples != 108 || r.Audit.Verdict != AuditClean || len(r.Targets) != 3 {
		t.Fatalf("%+v %v", r, problems)
	}
	// A pins file that is not there, and another run id.
	_, problems = CheckResults(st, manifests.DigestOf(samples), manifests.Digest{}, "run-other")
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	if len(problems) != 2 || !strings.Contains(got[0], "pins.json: signed, but no such file here") || !strings.Contains(got[1], "runId") {
		t.Errorf("problems: %q", got)
	}
	// Samples of two runs are not one run's results.
	mixed := strings.Replace(string(samples), "run-20261130T100000Z", "run-20261130T110000Z", 1)
	if _, err := ResultsStatement([]byte(mixed), pins, manifests.Digest{}, Audit{}, time.Unix(3, 0)); err == nil {
		t.Error("samples of two runs were attested")
	}
}
