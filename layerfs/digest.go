//go:build linux

package layerfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Digest is a SHA-256 digest: the name of a blob, a tree object or a Layer.
type Digest [sha256.Size]byte

// ParseDigest parses the 64 lower-case hex digits of a digest.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 2*sha256.Size {
		return d, fmt.Errorf("parsing digest %q: want %d hex digits, got %d", s, 2*sha256.Size, len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("parsing digest %q: %w", s, err)
	}
	return d, nil
}

// String returns the digest as 64 hex digits.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits, for people.
func (d Digest) Short() string { return d.String()[:12] }

// IsZero reports whether d is the zero digest (no content).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// LayerID names a Layer: the SHA-256 of its header (parent, root entry,
// message, time).
type LayerID Digest

// ParseLayerID parses a full 64-hex-digit Layer id. Use Store.ResolveLayer to
// accept unique prefixes.
func ParseLayerID(s string) (LayerID, error) {
	d, err := ParseDigest(s)
	return LayerID(d), err
}

func (id LayerID) String() string                { return Digest(id).String() }
func (id LayerID) Short() string                 { return Digest(id).Short() }
func (id LayerID) IsZero() bool                  { return Digest(id).IsZero() }
func (id LayerID) MarshalText() ([]byte, error)  { return Digest(id).MarshalText() }
func (id *LayerID) UnmarshalText(b []byte) error { return (*Digest)(id).UnmarshalText(b) }
