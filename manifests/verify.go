package manifests

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
)

// MismatchError says that content differs from what was declared for it.
type MismatchError struct {
	Field string // "size" or "digest"
	Want  string
	Got   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s mismatch: want %s, got %s", e.Field, e.Want, e.Got)
}

// NewVerifyingReader returns a reader over r that hashes what it reads,
// never reads more than size+1 bytes from r, and fails with a
// *MismatchError as soon as r turns out longer than size, or at EOF when it
// is shorter or its digest differs from want. Only a read that returns io.EOF
// vouches for the content: a caller must read to EOF.
func NewVerifyingReader(r io.Reader, size int64, want Digest) io.Reader {
	return &verifyingReader{r: io.LimitReader(r, size+1), h: sha256.New(), size: size, want: want}
}

type verifyingReader struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	size int64
	want Digest
	err  error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	if v.n > v.size {
		// Keep the bytes up to the declared size only; what follows is
		// never handed out.
		n -= int(v.n - v.size)
		v.h.Write(p[:n])
		v.err = &MismatchError{Field: "size", Want: fmt.Sprint(v.size), Got: fmt.Sprintf("more than %d", v.size)}
		return n, v.err
	}
	v.h.Write(p[:n])
	if err == io.EOF {
		if v.n < v.size {
			v.err = &MismatchError{Field: "size", Want: fmt.Sprint(v.size), Got: fmt.Sprint(v.n)}
		} else if got := DigestFromHash(v.h); got != v.want {
			v.err = &MismatchError{Field: "digest", Want: v.want.String(), Got: got.String()}
		} else {
			v.err = io.EOF
		}
		return n, v.err
	}
	if err != nil {
		v.err = err
	}
	return n, err
}
