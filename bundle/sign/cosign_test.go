package sign

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/toolcache"
)

// cosign runs the real cosign (built from the module proxy by `make tools`)
// with the password in its environment.
func cosign(t *testing.T, dir, password string, args ...string) []byte {
	t.Helper()
	bin := testenv.Tool(t, toolcache.Cosign(), "SEALBENCH_COSIGN")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password, "COSIGN_EXPERIMENTAL=0", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cosign %v: %v\n%s", args, err, out)
	}
	return out
}

// TestCosignVerifiesOurSignature: a manifest signed by sealbench verifies
// with `cosign verify-blob --key PUB --signature manifest.sig
// --insecure-ignore-tlog=true manifest.json`.
func TestCosignVerifiesOurSignature(t *testing.T) {
	dir, s, _ := newPair(t, testPassword)
	manifest := []byte("{\n  \"kind\": \"sealbench.bundle\"\n}\n")
	sig, err := s.SignManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o644)
	os.WriteFile(filepath.Join(dir, "manifest.sig"), sig, 0o644)
	out := cosign(t, dir, testPassword, "verify-blob", "--key", PublicKeyFile, "--signature", "manifest.sig", "--insecure-ignore-tlog=true", "manifest.json")
	if !bytes.Contains(out, []byte("Verified OK")) {
		t.Errorf("cosign did not say Verified OK:\n%s", out)
	}

	// And cosign refuses it once the manifest changes: the check can fail.
	os.WriteFile(filepath.Join(dir, "manifest.json"), append(manifest, ' '), 0o644)
	cmd := exec.Command(testenv.Tool(t, toolcache.Cosign(), "SEALBENCH_COSIGN"), "verify-blob", "--key", PublicKeyFile, "--signature", "manifest.sig", "--insecure-ignore-tlog=true", "manifest.json")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("cosign verified a changed manifest:\n%s", out)
	}
}

// TestCosignKeysSignBundles: a key pair that cosign generates loads in
// sealbench, and cosign's own signatures verify with sealbench's verifier;
// sealbench's key pair signs with cosign.
func TestCosignKeysSignBundles(t *testing.T) {
	dir := t.TempDir()
	cosign(t, dir, testPassword, "generate-key-pair")
	s, err := LoadPrivateKey(filepath.Join(dir, "cosign.key"), []byte(testPassword))
	if err != nil {
		t.Fatalf("loading cosign's private key: %v", err)
	}
	v, err := LoadPublicKey(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatalf("loading cosign's public key: %v", err)
	}
	blob := []byte("a manifest\n")
	sig, err := s.SignManifest(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyManifest(blob, sig); err != nil {
		t.Fatal(err)
	}

	// cosign signs with sealbench's key; sealbench verifies it.
	ours, _, ourV := newPair(t, testPassword)
	os.WriteFile(filepath.Join(ours, "blob"), blob, 0o644)
	cosign(t, ours, testPassword, "sign-blob", "--key", PrivateKeyFile, "--tlog-upload=false", "--output-signature", "blob.sig", "--yes", "blob")
	cosignSig, err := os.ReadFile(filepath.Join(ours, "blob.sig"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ourV.VerifyManifest(blob, cosignSig); err != nil {
		t.Errorf("cosign's signature with sealbench's key does not verify: %v", err)
	}
}
