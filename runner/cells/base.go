package cells

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/sealbench/sealbench/manifests"
)

// The base file that C09, C10 and C11 find committed in their base Layer.
const (
	BaseFile = "base.bin"
	BaseSize = 64 << 20
	// BaseSeed seeds the base file's bytes. Changing it (or the generator)
	// changes what C09-C11 measure and makes old results incomparable; the
	// test pins the resulting digest.
	BaseSeed uint64 = 0x5ea1be4c_0c09_0c11
)

// BaseReader returns the base file's bytes: BaseSize bytes of the SplitMix64
// stream from BaseSeed, each 64-bit output written little-endian. The
// generator is simple enough to rewrite in any language from this comment.
func BaseReader() io.Reader {
	return io.LimitReader(&splitMix64{state: BaseSeed}, BaseSize)
}

type splitMix64 struct {
	state uint64
	buf   [8]byte
	n     int // unread bytes at the end of buf
}

func (s *splitMix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *splitMix64) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && s.n > 0 {
		p[n] = s.buf[8-s.n]
		n++
		s.n--
	}
	for ; len(p)-n >= 8; n += 8 {
		binary.LittleEndian.PutUint64(p[n:], s.next())
	}
	if n < len(p) {
		binary.LittleEndian.PutUint64(s.buf[:], s.next())
		s.n = 8
		for n < len(p) {
			p[n] = s.buf[8-s.n]
			n++
			s.n--
		}
	}
	return n, nil
}

// WriteBase creates dir/base.bin with the base file's bytes. It refuses to
// replace an existing file.
func WriteBase(dir string) (err error) {
	p := filepath.Join(dir, BaseFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("creating the base file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing the base file %s: %w", p, cerr)
		}
	}()
	if _, err := io.CopyBuffer(f, BaseReader(), make([]byte, 1<<20)); err != nil {
		return fmt.Errorf("writing the base file %s: %w", p, err)
	}
	return nil
}

// BaseDigest is the SHA-256 of the base file, computed once from the
// generator.
var BaseDigest = sync.OnceValue(func() manifests.Digest {
	return digestOf(BaseReader())
})

// ZerosDigest is the SHA-256 of 64 MiB of zeros: what C06-C08 write and
// what C11 leaves in base.bin.
var ZerosDigest = sync.OnceValue(func() manifests.Digest {
	return digestOf(io.LimitReader(zeros{}, BaseSize))
})

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func digestOf(r io.Reader) manifests.Digest {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, r, make([]byte, 1<<20)); err != nil {
		panic(err) // the generators never fail
	}
	return manifests.DigestFromHash(h)
}
