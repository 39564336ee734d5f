package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
)

// SHA256 is the only digest algorithm sealbench writes or accepts.
const SHA256 = "sha256"

// Digest identifies content by its hash, written "sha256:<64 lowercase hex>".
// The zero Digest is invalid; IsZero reports it.
type Digest struct {
	Algorithm string
	Hex       string
}

// ParseDigest parses "sha256:<hex>", rejecting any other algorithm, upper
// case, and a hex part of the wrong length.
func ParseDigest(s string) (Digest, error) {
	alg, hx, ok := strings.Cut(s, ":")
	if !ok {
		return Digest{}, fmt.Errorf("digest %q: want algorithm:hex", s)
	}
	d := Digest{Algorithm: alg, Hex: hx}
	if err := d.Validate(); err != nil {
		return Digest{}, err
	}
	return d, nil
}

// DigestOf returns the SHA-256 digest of b.
func DigestOf(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest{Algorithm: SHA256, Hex: hex.EncodeToString(sum[:])}
}

// DigestFromHash returns the digest a SHA-256 hash.Hash has computed so far.
func DigestFromHash(h hash.Hash) Digest {
	return Digest{Algorithm: SHA256, Hex: hex.EncodeToString(h.Sum(nil))}
}

// Validate reports whether d is a well-formed SHA-256 digest.
func (d Digest) Validate() error {
	if d.Algorithm != SHA256 {
		return fmt.Errorf("digest %q: unsupported algorithm %q (want %q)", d.String(), d.Algorithm, SHA256)
	}
	if len(d.Hex) != sha256.Size*2 {
		return fmt.Errorf("digest %q: hex part has %d characters, want %d", d.String(), len(d.Hex), sha256.Size*2)
	}
	for _, c := range d.Hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("digest %q: hex part must be lowercase hexadecimal", d.String())
		}
	}
	return nil
}

// IsZero reports whether d is the zero Digest.
func (d Digest) IsZero() bool { return d == Digest{} }

// String returns "algorithm:hex".
func (d Digest) String() string { return d.Algorithm + ":" + d.Hex }

// Short returns the first n hex characters, as used in bundle names.
func (d Digest) Short(n int) string {
	if n > len(d.Hex) {
		n = len(d.Hex)
	}
	return d.Hex[:n]
}

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// HashFile returns the size and SHA-256 of the file at p.
func HashFile(p string) (int64, Digest, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, Digest{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, Digest{}, fmt.Errorf("hashing %s: %w", p, err)
	}
	return n, DigestFromHash(h), nil
}
