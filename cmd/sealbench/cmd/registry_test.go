//go:build !sealbench_bundle

package cmd

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/ociartifact/ocitest"
)

// TestBundleThroughARegistry is the "done when" against a real
// registry (Debian's docker-registry, distribution 2.8, on loopback), with
// the bundle this package's run tests seal: push prints the artifact's
// digest; skopeo reads the artifact; verify by reference pulls it and
// checks it as a local bundle, attestation and Sandbox image included;
// the same bundle with one file edited, pushed under another tag by
// someone with write access to the registry, is refused; and run by
// reference runs C01 on local with the pulled bundle and image, its
// pins.json naming the reference and the digest.
func TestBundleThroughARegistry(t *testing.T) {
	b := sealForRun(t)
	reg := testenv.Registry(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the bundle cache: empty, and this test's
	tag := "oci://" + reg + "/bench/bundle:v1"

	code, stdout, stderr := run(t, "push", "--json", "--bundle", b.Dir, "--key", b.PubKey, tag)
	if code != ExitOK {
		t.Fatalf("push: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var pushed ociartifact.Pushed
	if err := json.Unmarshal([]byte(stdout), &pushed); err != nil {
		t.Fatalf("push --json: %v\n%s", err, stdout)
	}
	if pushed.Bundle != b.Name || pushed.Image == "" || len(pushed.Referrers) != 2 || !strings.HasPrefix(pushed.Digest, "sha256:") {
		t.Errorf("pushed: %+v", pushed)
	}

	// The tar pushes as the same artifact: every manifest is deterministic.
	// It is extracted into a staging directory in TMPDIR, which goes
	// when the push ends, and a killed push's is removed by the next.
	t.Run("tar", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		killed := filepath.Join(tmp, ".sealbench-push-0123456789ab")
		os.MkdirAll(filepath.Join(killed, "bin"), 0o755)
		code, stdout, stderr := run(t, "push", "--json", "--bundle", b.Dir+".tar", "--key", b.PubKey, "oci://"+reg+"/bench/bundle:from-tar")
		var fromTar ociartifact.Pushed
		if code != ExitOK || json.Unmarshal([]byte(stdout), &fromTar) != nil || fromTar.Digest != pushed.Digest {
			t.Errorf("push of the tar: exit %d, digest %s, the directory's %s\n%s", code, fromTar.Digest, pushed.Digest, stderr)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("push of the tar left %v in TMPDIR", left)
		}
	})

	t.Run("skopeo", func(t *testing.T) {
		skopeo := testenv.NeedCommand(t, "skopeo")
		out, err := exec.Command(skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+reg+"/bench/bundle:v1").Output()
		if err != nil {
			t.Fatalf("skopeo inspect --raw: %v", err)
		}
		var m struct {
			ArtifactType string            `json:"artifactType"`
			Annotations  map[string]string `json:"annotations"`
		}
		if err := json.Unmarshal(out, &m); err != nil || m.ArtifactType != ociartifact.ArtifactType || m.Annotations[ociartifact.AnnotationBundle] != b.Name {
			t.Errorf("skopeo inspect --raw: %v\n%s", err, out)
		}
		// The Sandbox image beside it is an image skopeo reads whole.
		img := strings.TrimPrefix(pushed.Image, ociartifact.Scheme)
		out, err = exec.Command(skopeo, "inspect", "--tls-verify=false", "docker://"+img).Output()
		if err != nil || !strings.Contains(string(out), b.Name) {
			t.Errorf("skopeo inspect of the Sandbox image %s: %v\n%s", img, err, out)
		}
	})

	code, stdout, stderr = run(t, "verify", "--bundle", tag, "--key", b.PubKey, "--id", b.Name)
	if code != ExitOK {
		t.Fatalf("verify by reference: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("verify --bundle %s:\n%s", tag, stdout)
	if strings.Contains(stdout, "not here to check: "+b.Name+".tar, sealbench/sandbox") {
		t.Errorf("verify by reference lists the Sandbox image it checked as unchecked:\n%s", stdout)
	}
	for _, want := range []string{"verified " + b.Name, "checked manifest.sig and " + b.Name + ".sigstore.json: SLSA provenance v1",
		"pulled " + tag + " as " + pushed.Digest, "is the one the signed provenance names"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verify by reference does not say %q:\n%s", want, stdout)
		}
	}

	t.Run("edited", func(t *testing.T) {
		from, err := ociartifact.ParseRef(tag, false)
		if err != nil {
			t.Fatal(err)
		}
		to, err := ociartifact.ParseRef("oci://"+reg+"/bench/bundle:edited", false)
		if err != nil {
			t.Fatal(err)
		}
		ocitest.EditLayer(t, from.Reference, "cells/C01.sh", []byte("echo edited\n"), to.Reference)
		code, stdout, stderr := run(t, "verify", "--bundle", to.String(), "--key", b.PubKey)
		if code != ExitMismatch || !strings.Contains(stderr, "cells/C01.sh") || !strings.Contains(stderr, "bench/bundle@sha256:") {
			t.Errorf("verify of the edited bundle: exit %d\n%s\n%s", code, stdout, stderr)
		}
		t.Logf("verify --bundle %s: exit %d\n%s", to, code, stderr)
	})

	t.Run("run", func(t *testing.T) {
		shortStateDir(t)
		out := filepath.Join(t.TempDir(), "results")
		code, stdout, stderr := run(t, "run", "--target", "local", "--bundle", tag, "--key", b.PubKey, "--id", b.Name,
			"--cells", "C01", "--samples", "1", "--seed", "3", "--out", out)
		if code != ExitOK {
			t.Fatalf("run by reference: exit %d\n%s\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stderr, "checked the attached Sigstore bundle") || !strings.Contains(stderr, "pulling the Sandbox image") {
			t.Errorf("run did not check the attestation, or built the image instead of pulling it:\n%s", stderr)
		}
		f, err := os.Open(filepath.Join(out, manifests.PinsFile))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pins, err := manifests.ReadRunPins(f)
		if err != nil {
			t.Fatal(err)
		}
		if o := pins.BundleOrigin; o == nil || o.Ref != tag || o.Digest.String() != pushed.Digest || pins.BundleID != b.Name {
			t.Errorf("pins: bundle %s, origin %+v; want %s at %s", pins.BundleID, o, tag, pushed.Digest)
		}
	})
}

// TestResultsThroughARegistry: a signed run's results pushed to a real
// registry come back for report by reference, their signature with them:
// --require-signed --key passes; the same results with samples.jsonl
// edited and pushed under another tag are refused as altered (exit 1),
// and unsigned ones as untrusted (exit 2).
func TestResultsThroughARegistry(t *testing.T) {
	reg := testenv.Registry(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("SEALBENCH_PASSWORD", testPassword)
	keys := t.TempDir()
	if code, _, stderr := run(t, "keygen", "--out", keys); code != ExitOK {
		t.Fatalf("keygen: exit %d: %s", code, stderr)
	}
	signer, pub := loadKeys(t, keys)
	const runID = "run-20261130T100000Z"
	tag := "oci://" + reg + "/bench/results:r1"

	signed := signedRun(t, signer, runID, runID)
	code, stdout, stderr := run(t, "push", "--results", signed, tag)
	if code != ExitOK || !strings.Contains(stdout, "its signature attached") {
		t.Fatalf("push --results: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, "report", tag, "--key", pub, "--require-signed", "--format", "json")
	if code != ExitOK {
		t.Fatalf("report by reference: exit %d\n%s", code, stderr)
	}
	if got := reportSignature(t, stdout); got.State != "verified" {
		t.Errorf("results by reference: signature %+v", got)
	}
	var rep struct{ Runs []struct{ Source string } }
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Runs) != 1 || !strings.HasPrefix(rep.Runs[0].Source, "oci://"+reg+"/bench/results@sha256:") {
		t.Errorf("the report names the results by %+v, not by their reference (%v)", rep.Runs, err)
	}

	from, err := ociartifact.ParseRef(tag, false)
	if err != nil {
		t.Fatal(err)
	}
	edited, err := ociartifact.ParseRef("oci://"+reg+"/bench/results:edited", false)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := os.ReadFile(filepath.Join(reportRun, manifests.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	faster := []byte(strings.Replace(string(samples), `"commandNs":26808800,"execWallNs":30808800`, `"commandNs":16808800,"execWallNs":20808800`, 1))
	desc := ocitest.EditLayer(t, from.Reference, manifests.SamplesFile, faster, edited.Reference)
	// The edit has a digest of its own, so the run's signature does not
	// follow it: the results are unsigned.
	if code, _, stderr := run(t, "report", edited.String(), "--key", pub, "--require-signed"); code != ExitSignature {
		t.Errorf("edited results by reference: exit %d\n%s", code, stderr)
	}
	// A thorough attacker attaches the run's signature to the edit too:
	// the signature verifies, and what it signed is not what is there.
	sig, err := os.ReadFile(filepath.Join(signed, attest.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ociartifact.Attach(context.Background(), edited, desc, ociartifact.SigstoreBundleType, attest.ResultsFile, sig, nil, ociartifact.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the edit as first pulled, unsigned, is in the cache
	if code, _, stderr := run(t, "report", edited.String(), "--key", pub, "--require-signed"); code != ExitMismatch || !strings.Contains(stderr, "differ from what") {
		t.Errorf("edited results with the run's signature attached: exit %d\n%s", code, stderr)
	}

	// Another run, unsigned (the same bytes as a signed run would share
	// its artifact, and so its signature).
	unsigned := "oci://" + reg + "/bench/results:unsigned"
	if code, stdout, stderr := run(t, "push", "--results", signedRun(t, nil, runID, "run-20261130T110000Z"), unsigned); code != ExitOK || !strings.Contains(stdout, "unsigned") {
		t.Fatalf("push --results of an unsigned run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := run(t, "report", unsigned, "--key", pub, "--require-signed"); code != ExitSignature {
		t.Errorf("unsigned results by reference: exit %d\n%s", code, stderr)
	}
}
