package orchestrate

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/toolcache"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/vmimages"
)

const attestPassword = "attest-test-password"

type testKeys struct {
	dir      string
	signer   *sign.Signer
	verifier *sign.Verifier
}

func newTestKeys(t *testing.T) testKeys {
	t.Helper()
	dir := t.TempDir()
	priv, pub, err := sign.WriteKeyPair(dir, []byte(attestPassword), false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadPrivateKey(priv, []byte(attestPassword))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{dir, s, v}
}

// sealSmall assembles a small bundle through the code Seal uses after its
// builds, and signs its provenance as `seal` does, with an image.
func sealSmall(t *testing.T, k testKeys, cell string) (*bundle.SealResult, string) {
	t.Helper()
	out := t.TempDir()
	staged, err := os.MkdirTemp(out, ".seal-")
	if err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{
		"bin/linux-amd64/sealbench": "amd64 binary\x7fELF" + strings.Repeat("a", 64<<10),
		"bin/linux-arm64/sealbench": "arm64 binary\x7fELF" + strings.Repeat("b", 32<<10),
		"cells/C01.sh":              cell,
	} {
		full := filepath.Join(staged, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := manifests.BundleSource{
		Module: bundle.Module, Version: "0.1.0+g0123456789ab", Commit: "0123456789abcdef0123456789abcdef01234567",
		Time: time.Unix(1700000000, 0).UTC(), GoVersion: "go1.26.8", BuildFlags: []string{"-trimpath"},
		BuildEnv: []string{"CGO_ENABLED=0"}, Platforms: []string{"linux/amd64", "linux/arm64"},
	}
	res, err := bundle.Assemble(staged, out, src, k.signer, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	img := &vmimages.ImageInfo{Ref: vmimages.Repository + ":" + res.Name, ID: manifests.DigestOf([]byte("config")),
		Arch: "amd64", LockDigest: manifests.DigestOf([]byte("lock"))}
	p, err := AttestSeal(res, img, k.signer, time.Unix(1700000100, 0), time.Unix(1700000200, 0))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p) != filepath.Dir(res.Dir) || p != res.Dir+".sigstore.json" {
		t.Fatalf("the attestation is at %s, not beside %s", p, res.Dir)
	}
	return res, p
}

func verifyBundle(t *testing.T, path string, v *sign.Verifier) *bundle.VerifyResult {
	t.Helper()
	res, err := bundle.Verify(t.Context(), path, bundle.VerifyOptions{Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSealAttestationVerifies: the provenance names every file of the
// bundle, the tar and the image; it verifies on the directory and on the
// tar; and each way it can be wrong is refused with the right error.
func TestSealAttestationVerifies(t *testing.T) {
	k := newTestKeys(t)
	res, p := sealSmall(t, k, "echo one\n")

	for _, path := range []string{res.Dir, res.Tar} {
		att, err := VerifyAttestation(path, verifyBundle(t, path, k.verifier), k.verifier)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// 3 files, manifest.json, manifest.sig, SHA256SUMS, the tar, the image.
		if att.Subjects != 8 || att.Checked != 7 || len(att.Unchecked) != 1 || !strings.HasPrefix(att.Unchecked[0], vmimages.Repository+":") {
			t.Errorf("%s: %+v", path, att)
		}
		if att.PredicateType != attest.SLSAProvenanceV1 {
			t.Errorf("predicate %s", att.PredicateType)
		}
	}

	// The provenance says what it should.
	b, _ := os.ReadFile(p)
	for _, want := range []string{`"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"`, `"payloadType": "application/vnd.in-toto+json"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the Sigstore bundle lacks %s", want)
		}
	}
	st, err := k.verifier.VerifyAttestation(b)
	if err != nil {
		t.Fatal(err)
	}
	pred, _ := st.GetPredicate().MarshalJSON()
	for _, want := range []string{attest.BuildType, attest.BuilderID, `"gitCommit":"0123456789abcdef0123456789abcdef01234567"`, `"dirty":false`,
		`"goVersion":"go1.26.8"`, `"buildFlags":["-trimpath"]`, "vmimages/locks/sandbox-amd64.json", `"startedOn":"2023-11-14T22:15:00Z"`, `"finishedOn"`} {
		if !bytes.Contains(pred, []byte(want)) {
			t.Errorf("the provenance lacks %s:\n%s", want, pred)
		}
	}

	// Another key: a signature error (exit 2).
	other := newTestKeys(t)
	if _, err := VerifyAttestation(res.Dir, verifyBundle(t, res.Dir, k.verifier), other.verifier); !errors.Is(err, bundle.ErrSignature) {
		t.Errorf("another key: %v", err)
	}
	// A changed tar beside a good directory: that subject differs (exit 1).
	tb, _ := os.ReadFile(res.Tar)
	os.WriteFile(res.Tar, append(tb, make([]byte, 512)...), 0o644)
	var ce *bundle.ContentError
	if _, err := VerifyAttestation(res.Dir, verifyBundle(t, res.Dir, k.verifier), k.verifier); !errors.As(err, &ce) || ce.Problems[0].Path != res.Name+".tar" {
		t.Errorf("a changed tar: %v", err)
	}
	os.WriteFile(res.Tar, tb, 0o644)
	// The attestation of another bundle, by the same key, put beside this one.
	res2, p2 := sealSmall(t, k, "echo another\n")
	os.WriteFile(p2, b, 0o644)
	if _, err := VerifyAttestation(res2.Dir, verifyBundle(t, res2.Dir, k.verifier), k.verifier); !errors.As(err, &ce) || !strings.Contains(err.Error(), "cells/C01.sh") {
		t.Errorf("another bundle's attestation: %v", err)
	}
	// A payload with one byte changed no longer verifies.
	bad := bytes.Replace(b, []byte(`"payload": "`), []byte(`"payload": "e`), 1)
	os.WriteFile(p, bad, 0o644)
	if _, err := VerifyAttestation(res.Dir, verifyBundle(t, res.Dir, k.verifier), k.verifier); !errors.Is(err, bundle.ErrSignature) {
		t.Errorf("a changed payload: %v", err)
	}
	// None: said so, not an error.
	os.Remove(p)
	if _, err := VerifyAttestation(res.Dir, verifyBundle(t, res.Dir, k.verifier), k.verifier); !errors.Is(err, ErrNoAttestation) {
		t.Errorf("no attestation: %v", err)
	}
}

// TestSealAttestationSigstoreGo: sigstore-go itself, with the public key
// as its only trusted material, verifies the bundle for manifest.json (and
// for a binary) by digest, and refuses a digest that is not a subject.
func TestSealAttestationSigstoreGo(t *testing.T) {
	k := newTestKeys(t)
	res, p := sealSmall(t, k, "echo one\n")
	pubPEM, _ := os.ReadFile(filepath.Join(k.dir, sign.PublicKeyFile))
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	v, err := verify.NewSignedEntityVerifier(tm, verify.WithCurrentTime())
	if err != nil {
		t.Fatal(err)
	}
	b, err := sgbundle.LoadJSONFromPath(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{manifests.ManifestFile, "bin/linux-amd64/sealbench"} {
		data, _ := os.ReadFile(filepath.Join(res.Dir, filepath.FromSlash(f)))
		sum := sha256.Sum256(data)
		if _, err := v.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum[:]), verify.WithKey())); err != nil {
			t.Errorf("sigstore-go refuses the attestation for %s: %v", f, err)
		}
		data[len(data)/2] ^= 1
		sum = sha256.Sum256(data)
		if _, err := v.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum[:]), verify.WithKey())); err == nil {
			t.Errorf("sigstore-go verifies the attestation for %s with a byte changed", f)
		}
	}
}

// TestCosignVerifiesSealAttestation: cosign v2.5.0 verifies the seal's
// attestation for manifest.json offline, with the key: it needs
// --new-bundle-format, a trusted root to read (an empty one: with a key
// there is nothing else to trust; without --trusted-root it fetches the
// public-good root through TUF) and --insecure-ignore-tlog=true. It refuses
// it once a byte of that subject, or of a binary, changes.
func TestCosignVerifiesSealAttestation(t *testing.T) {
	cosign := testenv.Tool(t, toolcache.Cosign(), "SEALBENCH_COSIGN")
	k := newTestKeys(t)
	res, p := sealSmall(t, k, "echo one\n")
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	trJSON, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	trPath := filepath.Join(t.TempDir(), "empty-trusted-root.json")
	os.WriteFile(trPath, trJSON, 0o644)
	run := func(blob string) (string, error) {
		cmd := exec.Command(cosign, "verify-blob-attestation", "--new-bundle-format",
			"--key", filepath.Join(k.dir, sign.PublicKeyFile), "--bundle", p, "--type", "slsaprovenance1",
			"--trusted-root", trPath, "--insecure-ignore-tlog=true", blob)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, f := range []string{manifests.ManifestFile, "bin/linux-amd64/sealbench"} {
		blob := filepath.Join(res.Dir, filepath.FromSlash(f))
		out, err := run(blob)
		if err != nil || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign verify-blob-attestation %s: %v\n%s", f, err, out)
		}
		t.Logf("cosign, %s: %s", f, strings.TrimSpace(out))
		data, _ := os.ReadFile(blob)
		data[len(data)/2] ^= 1
		changed := filepath.Join(t.TempDir(), filepath.Base(blob))
		os.WriteFile(changed, data, 0o644)
		out, err = run(changed)
		if err == nil || !strings.Contains(out, "does not match any digest in statement") {
			t.Errorf("cosign verified the attestation for %s with a byte changed:\n%s", f, out)
		}
		t.Logf("cosign, %s with a byte changed: %v: %s", f, err, strings.TrimSpace(out))
	}
}
