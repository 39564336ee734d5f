package sign

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

const testPassword = "s3cret-sealbench-password"

func newPair(t *testing.T, pw string) (dir string, s *Signer, v *Verifier) {
	t.Helper()
	dir = t.TempDir()
	priv, pub, err := WriteKeyPair(dir, []byte(pw), false)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = LoadPrivateKey(priv, []byte(pw)); err != nil {
		t.Fatal(err)
	}
	if v, err = LoadPublicKey(pub); err != nil {
		t.Fatal(err)
	}
	return dir, s, v
}

func TestKeyPairFiles(t *testing.T) {
	dir, _, _ := newPair(t, testPassword)
	fi, err := os.Stat(filepath.Join(dir, PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %o, want 0600", fi.Mode().Perm())
	}
	priv, _ := os.ReadFile(filepath.Join(dir, PrivateKeyFile))
	if block, _ := pem.Decode(priv); block == nil || block.Type != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Errorf("private key is not an encrypted sigstore PEM: %.40q", priv)
	}
	if bytes.Contains(priv, []byte(testPassword)) {
		t.Error("the private key file contains the password")
	}
	// Refuses to overwrite, unless forced.
	if _, _, err := WriteKeyPair(dir, []byte("x"), false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second WriteKeyPair = %v, want fs.ErrExist", err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, PrivateKeyFile))
	if !bytes.Equal(priv, again) {
		t.Error("a refused WriteKeyPair changed the private key")
	}
	if _, _, err := WriteKeyPair(dir, []byte("x"), true); err != nil {
		t.Errorf("forced WriteKeyPair: %v", err)
	}
	if _, err := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile), []byte("x")); err != nil {
		t.Errorf("the forced key pair does not load with its password: %v", err)
	}
}

func TestEmptyPasswordStillEncrypts(t *testing.T) {
	dir, _, _ := newPair(t, "")
	priv, _ := os.ReadFile(filepath.Join(dir, PrivateKeyFile))
	if block, _ := pem.Decode(priv); block.Type != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Errorf("PEM type %q, want an encrypted key even with an empty password", block.Type)
	}
}

func TestSignVerify(t *testing.T) {
	_, s, v := newPair(t, testPassword)
	msg := []byte(`{"kind":"sealbench.bundle"}` + "\n")
	sig, err := s.SignManifest(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyManifest(msg, sig); err != nil {
		t.Fatalf("VerifyManifest: %v", err)
	}
	if err := v.VerifyManifest(msg, append(append([]byte{}, sig...), '\n')); err != nil {
		t.Errorf("a trailing newline in the signature file: %v", err)
	}
	// Deterministic: the same bytes sign the same.
	sig2, err := s.SignManifest(msg)
	if err != nil || !bytes.Equal(sig, sig2) {
		t.Errorf("signing twice gave different signatures:\n%s\n%s", sig, sig2)
	}
	// Any change to the message or the signature fails.
	tampered := append([]byte{}, msg...)
	tampered[3] ^= 1
	if err := v.VerifyManifest(tampered, sig); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered message: %v, want ErrBadSignature", err)
	}
	badSig := append([]byte{}, sig...)
	badSig[10] = 'A' + (badSig[10]-'A'+1)%26
	if err := v.VerifyManifest(msg, badSig); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered signature: %v, want ErrBadSignature", err)
	}
	for _, s := range []string{"", "!!!not base64!!!", strings.Repeat("A", MaxSignatureSize+1)} {
		if err := v.VerifyManifest(msg, []byte(s)); !errors.Is(err, ErrBadSignature) {
			t.Errorf("signature %.20q: %v, want ErrBadSignature", s, err)
		}
	}
	// Another key's signature fails.
	_, other, _ := newPair(t, testPassword)
	otherSig, _ := other.SignManifest(msg)
	if err := v.VerifyManifest(msg, otherSig); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key's signature: %v, want ErrBadSignature", err)
	}
}

func TestEd25519Keys(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := cryptoutils.MarshalPrivateKeyToEncryptedDER(priv, cryptoutils.StaticPasswordFunc([]byte("pw")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParsePrivateKey(cryptoutils.PEMEncode(cryptoutils.EncryptedSigstorePrivateKeyPEMType, der), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, _ := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	v, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.SignManifest([]byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifyManifest([]byte("m"), sig); err != nil {
		t.Error(err)
	}
}

func TestKeyErrors(t *testing.T) {
	dir, _, _ := newPair(t, testPassword)
	privPath := filepath.Join(dir, PrivateKeyFile)
	pubPath := filepath.Join(dir, PublicKeyFile)
	privPEM, _ := os.ReadFile(privPath)
	pubPEM, _ := os.ReadFile(pubPath)

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	plainPEM, _ := cryptoutils.MarshalPrivateKeyToPEM(ec)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaPubPEM, _ := cryptoutils.MarshalPublicKeyToPEM(rsaKey.Public())
	corrupted := bytes.Replace(privPEM, []byte("\n"), []byte("\n!"), 3)

	privCases := []struct {
		name, pw string
		pem      []byte
		want     string
	}{
		{"wrong password", "not-the-password", privPEM, "wrong password"},
		{"corrupted key file", testPassword, corrupted, "corrupted"},
		{"unencrypted private key", "", plainPEM, "not encrypted"},
		{"a public key as the private key", testPassword, pubPEM, "public key"},
		{"not PEM", testPassword, []byte("hello"), "no PEM block"},
	}
	for _, tt := range privCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePrivateKey(tt.pem, []byte(tt.pw))
			if !errors.Is(err, ErrKey) {
				t.Fatalf("ParsePrivateKey = %v, want ErrKey", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testPassword) || (tt.pw != "" && strings.Contains(err.Error(), tt.pw)) {
				t.Errorf("error %q contains the password", err)
			}
		})
	}
	pubCases := []struct {
		name string
		pem  []byte
		want string
	}{
		{"RSA public key", rsaPubPEM, "RSA"},
		{"a private key as the public key", privPEM, "private key"},
		{"not PEM", []byte("hello"), "no PEM block"},
	}
	for _, tt := range pubCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePublicKey(tt.pem)
			if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParsePublicKey = %v, want ErrKey saying %q", err, tt.want)
			}
		})
	}
	if _, err := LoadPrivateKey(filepath.Join(dir, "absent.key"), nil); !errors.Is(err, ErrKey) {
		t.Errorf("absent key file: %v", err)
	}
}

// TestOtherCurvesRefused: a P-384 or P-521 key, public or private, is
// refused as an unsupported curve, not left to fail as "does not verify".
func TestOtherCurvesRefused(t *testing.T) {
	for _, c := range []elliptic.Curve{elliptic.P384(), elliptic.P521()} {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := cryptoutils.MarshalPublicKeyToPEM(k.Public())
		if _, err := ParsePublicKey(pub); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "unsupported curve") {
			t.Errorf("%s public key: %v, want an unsupported curve", c.Params().Name, err)
		}
		priv, _ := cryptoutils.MarshalPrivateKeyToEncryptedDER(k, cryptoutils.StaticPasswordFunc([]byte("pw")))
		if _, err := ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: string(cryptoutils.EncryptedSigstorePrivateKeyPEMType), Bytes: priv}), []byte("pw")); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "unsupported curve") {
			t.Errorf("%s private key: %v, want an unsupported curve", c.Params().Name, err)
		}
	}
}
