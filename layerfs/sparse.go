//go:build linux

package layerfs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Holes. A file's holes are found with SEEK_DATA and SEEK_HOLE and kept as
// holes: a copy into the Store copies the data extents only (and sets the
// size), and hashing never reads a hole. Hashing must not read holes for a
// sparse file to commit quickly, and SHA-256 cannot skip zeros, so a
// Store of schema 2 names a blob larger than blobChunk by its chunked
// digest:
//
//	SHA-256("layerfs blob v2\x00" || uvarint(size) || SHA-256(chunk 0) || SHA-256(chunk 1) || ...)
//
// with 1 MiB chunks, the last one shorter. A chunk that lies in a hole
// hashes to the precomputed SHA-256 of that many zeros, unread. The digest
// depends on the bytes only, not on where the holes are: a chunk of
// written zeros names the same as a hole. Blobs up to 1 MiB (most files)
// keep the plain SHA-256 of their bytes, as every blob of a schema-1 Store
// does.

// blobChunk is the chunk of the chunked digest.
const blobChunk = 1 << 20

// chunkedPrefix opens every chunked digest.
const chunkedPrefix = "layerfs blob v2\x00"

// zeroChunkSum is the SHA-256 of a whole chunk of zeros.
var zeroChunkSum = sha256.Sum256(make([]byte, blobChunk))

// chunkedDigest returns the chunked digest of the file at path, its size
// and how many bytes it read, reading data extents only. Files up to
// blobChunk get the plain SHA-256.
func chunkedDigest(ctx context.Context, path string) (Digest, int64, int64, error) {
	f, err := openToHash(path)
	if err != nil {
		return Digest{}, 0, 0, fmt.Errorf("hashing %q: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Digest{}, 0, 0, fmt.Errorf("hashing %q: %w", path, err)
	}
	size := st.Size()
	if size <= blobChunk {
		return hashReader(ctx, f, path)
	}
	// Which chunks hold data: the others hash to the SHA-256 of zeros,
	// unread. The data chunks are hashed in parallel: a first open that
	// verifies a blob then reads it about as fast as the disk gives it.
	fd := int(f.Fd())
	nChunks := (size + blobChunk - 1) / blobChunk
	var data []int64
	dataAt := int64(-1) // the next data at or after the chunk, once looked up
	for i := int64(0); i < nChunks; i++ {
		off := i * blobChunk
		if dataAt < off {
			dataAt = nextData(fd, off, size)
		}
		if dataAt < off+min(blobChunk, size-off) {
			data = append(data, i)
		} else if dataAt >= size {
			break
		} else {
			i = dataAt/blobChunk - 1 // skip the hole
		}
	}
	sums := make(map[int64][sha256.Size]byte, len(data))
	var mu sync.Mutex
	var read atomic.Int64
	workers := min(Workers(), 4)
	err = parallel(len(data), workers, func(j int) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("hashing %q: %w", path, err)
		}
		i := data[j]
		off := i * blobChunk
		n := min(blobChunk, size-off)
		bp := hashBufPool.Get().(*[]byte)
		defer hashBufPool.Put(bp)
		m, err := io.ReadFull(io.NewSectionReader(f, off, n), (*bp)[:n])
		read.Add(int64(m))
		if err != nil {
			return fmt.Errorf("hashing %q at %d: %w (did it shrink while being read?)", path, off, err)
		}
		sum := sha256.Sum256((*bp)[:n])
		mu.Lock()
		sums[i] = sum
		mu.Unlock()
		failpoint("hash-chunk")
		return nil
	})
	if err != nil {
		return Digest{}, 0, read.Load(), err
	}
	outer := sha256.New()
	outer.Write([]byte(chunkedPrefix))
	outer.Write(binary.AppendUvarint(nil, uint64(size)))
	for i := int64(0); i < nChunks; i++ {
		if sum, ok := sums[i]; ok {
			outer.Write(sum[:])
			continue
		}
		if n := min(blobChunk, size-i*blobChunk); n == blobChunk {
			outer.Write(zeroChunkSum[:])
		} else {
			sum := sha256.Sum256(make([]byte, n))
			outer.Write(sum[:])
		}
	}
	var d Digest
	outer.Sum(d[:0])
	return d, size, read.Load(), nil
}

// nextData is where the next data at or after off starts: size when only
// a hole follows, off itself where the filesystem cannot say.
func nextData(fd int, off, size int64) int64 {
	d, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case err == unix.ENXIO:
		return size
	case err != nil:
		return off
	}
	return d
}

// dataExtents calls fn for each data extent of the open file fd in
// [start, end), as SEEK_DATA and SEEK_HOLE find them; where the
// filesystem cannot say, the whole range is one extent.
func dataExtents(fd int, start, end int64, fn func(off, n int64) error) error {
	for off := start; off < end; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			return nil
		}
		if err != nil {
			return fn(off, end-off)
		}
		if data >= end {
			return nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil || hole > end {
			hole = end
		}
		if err := fn(data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// copySparse copies [start, end) of in to the same offsets of out, data
// extents only (out's holes stay holes), in pieces of at most 64 MiB with
// ctx checked between them. It returns how many bytes it copied.
func copySparse(ctx context.Context, in, out *os.File, start, end int64) (int64, error) {
	var copied int64
	err := dataExtents(int(in.Fd()), start, end, func(off, n int64) error {
		for n > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			m := min(n, 64<<20)
			c, err := copyRange(int(in.Fd()), off, int(out.Fd()), off, int(m))
			copied += int64(c)
			if err != nil {
				return err
			}
			if int64(c) < m {
				return nil // the file ended early: it shrank meanwhile
			}
			off += m
			n -= m
		}
		return nil
	})
	return copied, err
}

// copyFileSparse copies all of in into out (an empty file), keeping holes,
// and gives out in's size. It returns the size.
func copyFileSparse(ctx context.Context, in, out *os.File) (int64, error) {
	st, err := in.Stat()
	if err != nil {
		return 0, err
	}
	if _, err := copySparse(ctx, in, out, 0, st.Size()); err != nil {
		return 0, err
	}
	if err := out.Truncate(st.Size()); err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// hasHoles says whether the open file fd has a hole before its end.
func hasHoles(fd int, size int64) bool {
	h, err := unix.Seek(fd, 0, unix.SEEK_HOLE)
	return err == nil && h < size
}
