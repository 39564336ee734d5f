// Package sign makes and checks the signatures that seal a bundle: key pairs
// in the format sigstore's cryptoutils reads and writes (so cosign uses the
// same keys), and detached signatures over a manifest in the form
// `cosign verify-blob --key` accepts: base64 of an ASN.1 ECDSA (or raw
// Ed25519) signature over the file's bytes.
//
// Signatures are deterministic (RFC 6979 for ECDSA; Ed25519 is deterministic
// by construction), so sealing the same source twice gives a byte-identical
// bundle, signature included.
//
// This package is the only one that links signing code; the binaries that
// ship inside a bundle never import it (a test holds that).
package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// File names and the environment variable for the private key's password,
// named as cosign names its own (cosign.key, cosign.pub, COSIGN_PASSWORD).
const (
	PrivateKeyFile = "sealbench.key"
	PublicKeyFile  = "sealbench.pub"
	PasswordEnv    = "SEALBENCH_PASSWORD"

	// MaxKeySize bounds how much of a key file is read.
	MaxKeySize = 64 << 10
	// MaxSignatureSize bounds how much of a signature file is read.
	MaxSignatureSize = 64 << 10
)

// ErrKey marks every error about a key: unreadable, corrupted, of the wrong
// type, unencrypted, or a wrong password.
var ErrKey = errors.New("unusable key")

// ErrBadSignature marks a signature that does not verify or cannot be decoded.
var ErrBadSignature = errors.New("signature does not verify")

func keyErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrKey, fmt.Sprintf(format, args...))
}

// GenerateKeyPair returns a new ECDSA P-256 key pair (cosign's default):
// the private key encrypted with password (empty is allowed, as cosign allows
// it, and still encrypts) as PEM "ENCRYPTED SIGSTORE PRIVATE KEY", and the
// public key as PEM "PUBLIC KEY".
func GenerateKeyPair(password []byte) (privPEM, pubPEM []byte, err error) {
	if password == nil {
		password = []byte{} // nil would mean "do not encrypt" to cryptoutils
	}
	privPEM, pubPEM, err = cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		return nil, nil, fmt.Errorf("generating ECDSA P-256 key pair: %w", err)
	}
	return privPEM, pubPEM, nil
}

// Signer signs manifests with a private key. It implements sigstore's
// signature.Signer, with deterministic signatures.
type Signer struct {
	priv crypto.Signer
	ed   *signature.ED25519Signer // set for Ed25519 keys
}

var _ signature.Signer = (*Signer)(nil)

// ParsePrivateKey decrypts and parses an encrypted private key PEM. An
// unencrypted private key is refused: keys are encrypted at rest.
func ParsePrivateKey(pemBytes, password []byte) (*Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, keyErrorf("no PEM block found: the file is not a private key or is corrupted")
	}
	switch block.Type {
	case string(cryptoutils.EncryptedSigstorePrivateKeyPEMType), "ENCRYPTED COSIGN PRIVATE KEY":
	case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
		return nil, keyErrorf("the private key is not encrypted (PEM %q); sealbench keeps keys encrypted at rest: create one with `sealbench keygen`", block.Type)
	case "PUBLIC KEY":
		return nil, keyErrorf("this is a public key; signing needs the private key (%s)", PrivateKeyFile)
	default:
		return nil, keyErrorf("PEM type %q is not an encrypted sigstore private key", block.Type)
	}
	if password == nil {
		password = []byte{}
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		// The error from the decryption says nothing about the password
		// itself; keep it that way.
		if strings.Contains(err.Error(), "decrypt") {
			return nil, keyErrorf("wrong password, or the key file is corrupted (the password comes from $%s)", PasswordEnv)
		}
		return nil, keyErrorf("parsing the private key: %v", err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if err := checkCurve(k.Curve); err != nil {
			return nil, err
		}
		return &Signer{priv: k}, nil
	case ed25519.PrivateKey:
		ed, err := signature.LoadED25519Signer(k)
		if err != nil {
			return nil, keyErrorf("loading Ed25519 key: %v", err)
		}
		return &Signer{priv: k, ed: ed}, nil
	case *rsa.PrivateKey:
		return nil, keyErrorf("RSA keys are not supported: sealbench signs with ECDSA (P-256, cosign's default) or Ed25519")
	default:
		return nil, keyErrorf("private key of type %T is not supported", key)
	}
}

// LoadPrivateKey reads and decrypts the private key at path.
func LoadPrivateKey(path string, password []byte) (*Signer, error) {
	b, err := readBounded(path, MaxKeySize)
	if err != nil {
		return nil, keyErrorf("reading private key: %v", err)
	}
	s, err := ParsePrivateKey(b, password)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return s, nil
}

// PublicKey implements signature.PublicKeyProvider.
func (s *Signer) PublicKey(...signature.PublicKeyOption) (crypto.PublicKey, error) {
	return s.priv.Public(), nil
}

// SignMessage implements signature.Signer: it returns the raw signature
// over the message's bytes. ECDSA signatures use RFC 6979 nonces.
func (s *Signer) SignMessage(message io.Reader, opts ...signature.SignOption) ([]byte, error) {
	if s.ed != nil {
		return s.ed.SignMessage(message, opts...)
	}
	digest, hf, err := signature.ComputeDigestForSigning(message, crypto.SHA256, []crypto.Hash{crypto.SHA256}, opts...)
	if err != nil {
		return nil, err
	}
	// A nil random source asks crypto/ecdsa for a deterministic signature.
	return s.priv.Sign(nil, digest, hf)
}

// SignManifest signs manifest bytes and returns the contents of a
// manifest.sig file: the base64 of the signature, as cosign sign-blob writes.
// It checks its own signature before returning it.
func (s *Signer) SignManifest(manifest []byte) ([]byte, error) {
	raw, err := s.SignMessage(bytes.NewReader(manifest))
	if err != nil {
		return nil, fmt.Errorf("signing manifest: %w", err)
	}
	v, err := NewVerifier(s.priv.Public())
	if err != nil {
		return nil, err
	}
	sig := []byte(base64.StdEncoding.EncodeToString(raw))
	if err := v.VerifyManifest(manifest, sig); err != nil {
		return nil, fmt.Errorf("signing manifest: the new signature does not verify: %w", err)
	}
	return sig, nil
}

// checkCurve refuses every ECDSA curve but P-256: signatures are over
// SHA-256, and a P-256 signature checked with another curve's key would
// only ever say "does not verify".
func checkCurve(c elliptic.Curve) error {
	if c != elliptic.P256() {
		return keyErrorf("unsupported curve %s: sealbench keys are ECDSA P-256 (or Ed25519); make a pair with `sealbench keygen`", c.Params().Name)
	}
	return nil
}

// Verifier checks manifest signatures against one public key.
type Verifier struct {
	v   signature.Verifier
	pub crypto.PublicKey
}

// NewVerifier returns a Verifier for an ECDSA or Ed25519 public key.
func NewVerifier(pub crypto.PublicKey) (*Verifier, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if err := checkCurve(k.Curve); err != nil {
			return nil, err
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		return nil, keyErrorf("RSA public keys are not supported: sealbench signs with ECDSA (P-256) or Ed25519")
	default:
		return nil, keyErrorf("public key of type %T is not supported", k)
	}
	if err := cryptoutils.ValidatePubKey(pub); err != nil {
		return nil, keyErrorf("public key: %v", err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, keyErrorf("loading public key: %v", err)
	}
	return &Verifier{v: v, pub: pub}, nil
}

// ParsePublicKey parses a PEM public key.
func ParsePublicKey(pemBytes []byte) (*Verifier, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, keyErrorf("no PEM block found: the file is not a public key or is corrupted")
	}
	if block.Type != string(cryptoutils.PublicKeyPEMType) {
		if strings.Contains(block.Type, "PRIVATE KEY") {
			return nil, keyErrorf("this is a private key (PEM %q); verification takes the public key (%s)", block.Type, PublicKeyFile)
		}
		return nil, keyErrorf("PEM type %q is not a public key", block.Type)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, keyErrorf("parsing public key: %v", err)
	}
	return NewVerifier(pub)
}

// LoadPublicKey reads the PEM public key at path.
func LoadPublicKey(path string) (*Verifier, error) {
	b, err := readBounded(path, MaxKeySize)
	if err != nil {
		return nil, keyErrorf("reading public key: %v", err)
	}
	v, err := ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return v, nil
}

// KeyID is a short fingerprint of the public key: the SHA-256 of its DER
// encoding, "sha256:" and 16 hex digits. It is shown, never trusted.
func (v *Verifier) KeyID() string {
	der, err := cryptoutils.MarshalPublicKeyToDER(v.pub)
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(der)
	return fmt.Sprintf("sha256:%x", sum[:8])
}

// VerifyManifest checks a manifest.sig file's contents (base64, with or
// without a trailing newline) against the manifest's bytes.
func (v *Verifier) VerifyManifest(manifest, sigFile []byte) error {
	if len(sigFile) > MaxSignatureSize {
		return fmt.Errorf("%w: signature file is %d bytes, more than %d", ErrBadSignature, len(sigFile), MaxSignatureSize)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sigFile)))
	if err != nil {
		return fmt.Errorf("%w: signature is not base64: %v", ErrBadSignature, err)
	}
	if len(raw) == 0 {
		return fmt.Errorf("%w: signature is empty", ErrBadSignature)
	}
	if err := v.v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(manifest)); err != nil {
		return fmt.Errorf("%w with key %s: %v", ErrBadSignature, v.KeyID(), err)
	}
	return nil
}

func readBounded(path string, max int64) ([]byte, error) {
	// A key given as a fifo or a device is refused, not waited on.
	return manifests.ReadRegular(path, max)
}

// WriteKeyPair generates a key pair and writes it into dir as
// sealbench.key (mode 0600) and sealbench.pub (0644). Existing keys are left
// alone, and an error wrapping fs.ErrExist is returned, unless force is set.
func WriteKeyPair(dir string, password []byte, force bool) (privPath, pubPath string, err error) {
	privPath = filepath.Join(dir, PrivateKeyFile)
	pubPath = filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privPath, pubPath} {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case !force:
			return "", "", fmt.Errorf("%s: %w", p, fs.ErrExist)
		case !fi.Mode().IsRegular():
			// Checked for both before either is written: --force
			// replaces keys, never a symlink, fifo or device.
			return "", "", fmt.Errorf("%s is a %s, which --force never replaces: %w", p, manifests.FileTypeName(fi.Mode()), atomicfile.ErrNotRegular)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("creating key directory: %w", err)
	}
	privPEM, pubPEM, err := GenerateKeyPair(password)
	if err != nil {
		return "", "", err
	}
	write := atomicfile.Create
	if force {
		write = atomicfile.WriteFile
	}
	if err := write(privPath, privPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := write(pubPath, pubPEM, 0o644); err != nil {
		os.Remove(privPath) // never leave half a pair
		return "", "", err
	}
	return privPath, pubPath, nil
}
