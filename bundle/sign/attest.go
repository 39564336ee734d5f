package sign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
)

// Attestations are in-toto Statements v1 in a DSSE envelope, in a Sigstore
// bundle v0.3 (application/vnd.dev.sigstore.bundle.v0.3+json, the
// *.sigstore.json that cosign writes with --new-bundle-format), signed with
// the same keys as manifest.sig. Keyed and offline: the bundle's
// verification material is the key's hint, with no certificate,
// transparency log entry or timestamp.
const (
	// AttestationSuffix ends the name of a Sigstore bundle file.
	AttestationSuffix = ".sigstore.json"
	// InTotoPayloadType is the DSSE payload type of an in-toto Statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
	// MaxAttestationSize bounds how much of an attestation file is read:
	// a bundle's Statement lists a few dozen files.
	MaxAttestationSize = 16 << 20
)

// SignStatement signs st into a Sigstore bundle (v0.3, DSSE) and returns
// its JSON, indented. It checks its own bundle before returning it.
func (s *Signer) SignStatement(st *intoto.Statement) ([]byte, error) {
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("signing an attestation: the statement is not valid: %w", err)
	}
	payload, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("signing an attestation: %w", err)
	}
	payload, err = stableJSON(payload, false)
	if err != nil {
		return nil, err
	}
	pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: payload, PayloadType: InTotoPayloadType}, keypair{s}, sgsign.BundleOptions{Context: context.Background()})
	if err != nil {
		return nil, fmt.Errorf("signing an attestation: %w", err)
	}
	b, err := protojson.Marshal(pb)
	if err != nil {
		return nil, fmt.Errorf("signing an attestation: %w", err)
	}
	// protojson varies its whitespace on purpose; the file should not.
	out, err := stableJSON(b, true)
	if err != nil {
		return nil, err
	}
	v, err := NewVerifier(s.priv.Public())
	if err != nil {
		return nil, err
	}
	if _, err := v.VerifyAttestation(out); err != nil {
		return nil, fmt.Errorf("signing an attestation: the new bundle does not verify: %w", err)
	}
	return out, nil
}

func stableJSON(b []byte, indent bool) ([]byte, error) {
	var out bytes.Buffer
	var err error
	if indent {
		err = json.Indent(&out, b, "", "  ")
		out.WriteByte('\n')
	} else {
		err = json.Compact(&out, b)
	}
	if err != nil {
		return nil, fmt.Errorf("re-encoding JSON: %w", err)
	}
	return out.Bytes(), nil
}

// ReadAttestation reads a Sigstore bundle file, at most
// MaxAttestationSize bytes of it.
func ReadAttestation(path string) ([]byte, error) { return readBounded(path, MaxAttestationSize) }

// VerifyAttestation checks a Sigstore bundle's signature with v's key,
// through sigstore-go with the key as the only trusted material, and
// returns the in-toto Statement it signs. It checks no subject: the caller
// compares them with what it has. Every failure wraps ErrBadSignature.
func (v *Verifier) VerifyAttestation(bundleJSON []byte) (*intoto.Statement, error) {
	if len(bundleJSON) > MaxAttestationSize {
		return nil, fmt.Errorf("%w: the Sigstore bundle is %d bytes, more than %d", ErrBadSignature, len(bundleJSON), MaxAttestationSize)
	}
	var b sgbundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return nil, fmt.Errorf("%w: not a Sigstore bundle: %v", ErrBadSignature, err)
	}
	if !b.MinVersion("v0.3") {
		return nil, fmt.Errorf("%w: a Sigstore bundle older than v0.3 (%s)", ErrBadSignature, b.GetMediaType())
	}
	env, err := b.Envelope()
	if err != nil || env == nil {
		return nil, fmt.Errorf("%w: the Sigstore bundle holds no DSSE envelope", ErrBadSignature)
	}
	if env.PayloadType != InTotoPayloadType {
		return nil, fmt.Errorf("%w: the DSSE payload is %q, not an in-toto Statement", ErrBadSignature, env.PayloadType)
	}
	key := root.NewExpiringKey(v.v, time.Time{}, time.Time{})
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	sev, err := verify.NewSignedEntityVerifier(tm, verify.WithCurrentTime())
	if err != nil {
		return nil, fmt.Errorf("verifying the Sigstore bundle: %w", err)
	}
	res, err := sev.Verify(&b, verify.NewPolicy(verify.WithoutArtifactUnsafe(), verify.WithKey()))
	if err != nil {
		return nil, fmt.Errorf("%w with key %s: %v", ErrBadSignature, v.KeyID(), err)
	}
	if res.Statement == nil {
		return nil, fmt.Errorf("%w: the Sigstore bundle signs no in-toto Statement", ErrBadSignature)
	}
	if err := res.Statement.Validate(); err != nil {
		return nil, fmt.Errorf("%w: the signed statement is not valid: %v", ErrBadSignature, err)
	}
	return res.Statement, nil
}

// KeyDigest names the public key in full: "sha256:" and the hex SHA-256 of
// its DER (PKIX) encoding.
func (v *Verifier) KeyDigest() string {
	der, err := cryptoutils.MarshalPublicKeyToDER(v.pub)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(der))
}

// keypair is a Signer as sigstore-go's sign.Keypair, with our
// deterministic signatures.
type keypair struct{ s *Signer }

func (k keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

// GetHint is the hint cosign and sigstore-go write: base64 of the SHA-256
// of the public key's DER encoding.
func (k keypair) GetHint() []byte {
	der, err := cryptoutils.MarshalPublicKeyToDER(k.s.priv.Public())
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(der)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

func (k keypair) GetKeyAlgorithm() string {
	if k.s.ed != nil {
		return "ED25519"
	}
	return "ECDSA"
}

func (k keypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.s.priv.Public())
	return string(b), err
}

func (k keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sig, err := k.s.SignMessage(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(data)
	return sig, sum[:], nil
}

// HintDigest turns a bundle's key hint (base64 of the key's SHA-256, as
// GetHint writes it) into the KeyDigest form, "" when it is not one. It
// names the key the bundle claims; only a verification proves it.
func HintDigest(bundleJSON []byte) string {
	var b sgbundle.Bundle
	if b.UnmarshalJSON(bundleJSON) != nil {
		return ""
	}
	pk := b.GetVerificationMaterial().GetPublicKey()
	if pk == nil {
		return ""
	}
	sum, err := base64.StdEncoding.DecodeString(pk.GetHint())
	if err != nil || len(sum) != sha256.Size {
		return ""
	}
	return fmt.Sprintf("sha256:%x", sum)
}

// Verifier returns the Verifier of s's public key.
func (s *Signer) Verifier() (*Verifier, error) { return NewVerifier(s.priv.Public()) }
