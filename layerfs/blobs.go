//go:build linux

package layerfs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// hashBufPool holds read buffers for hashing.
var hashBufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// digestFile returns the digest of the file at path as this Store names
// blobs, its size, and how many bytes it read. It stops when ctx ends.
func (s *Store) digestFile(ctx context.Context, path string) (Digest, int64, int64, error) {
	if s.schema >= 2 {
		return chunkedDigest(ctx, path)
	}
	return hashFileCtx(ctx, path)
}

// openToHash opens the file at path for reading without touching its
// atime (O_NOATIME, which only the file's owner or a privileged process
// may use; others open it plainly).
func openToHash(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOATIME, 0)
	if errors.Is(err, fs.ErrPermission) {
		f, err = os.Open(path)
	}
	return f, err
}

// hashFileCtx returns the SHA-256 of the file at path, its size and how
// many bytes it read, checking ctx between buffers.
func hashFileCtx(ctx context.Context, path string) (Digest, int64, int64, error) {
	f, err := openToHash(path)
	if err != nil {
		return Digest{}, 0, 0, fmt.Errorf("hashing %q: %w", path, err)
	}
	defer f.Close()
	return hashReader(ctx, f, path)
}

// hashReader returns the SHA-256 of what r has left to read, its size and
// how many bytes it read, checking ctx between buffers; path names r in
// errors.
func hashReader(ctx context.Context, r io.Reader, path string) (Digest, int64, int64, error) {
	h := sha256.New()
	bp := hashBufPool.Get().(*[]byte)
	defer hashBufPool.Put(bp)
	n, err := io.CopyBuffer(h, onlyReader{ctxReader{ctx, r}}, *bp)
	if err != nil {
		return Digest{}, 0, n, fmt.Errorf("hashing %q: %w", path, err)
	}
	var d Digest
	h.Sum(d[:0])
	return d, n, n, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// onlyReader hides a file's WriterTo so that io.CopyBuffer uses the buffer.
type onlyReader struct{ io.Reader }

// tempPath returns a fresh temporary file name inside the Store, on the same
// filesystem as the blobs so that installing is a rename.
func (s *Store) tempFile() (*os.File, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, tmpDir), "blob-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary file in %q: %w", s.dir, err)
	}
	return f, nil
}

// copyToTemp copies the file at src into a new temporary file in the Store
// (copy_file_range: in the kernel, a reflink where the filesystem has them),
// data extents only, so that its holes stay holes, and returns the
// temporary file's path.
func (s *Store) copyToTemp(ctx context.Context, src string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("copying %q into the store: %w", src, err)
	}
	defer in.Close()
	out, err := s.tempFile()
	if err != nil {
		return "", err
	}
	_, err = copyFileSparse(ctx, in, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("copying %q into the store: %w", src, err)
	}
	return out.Name(), nil
}

// installBlob makes the file at path the blob d: renamed into place, or
// removed if the blob already exists. The file must not change afterwards.
// created says whether this call put the blob there.
func (s *Store) installBlob(path string, d Digest) (created bool, err error) {
	dst := s.blobPath(d)
	if _, err := os.Lstat(dst); err == nil {
		if err := os.Remove(path); err != nil {
			return false, fmt.Errorf("removing duplicate of blob %s: %w", d.Short(), err)
		}
		return false, nil
	}
	if err := os.Chmod(path, 0o444); err != nil {
		return false, fmt.Errorf("installing blob %s: %w", d.Short(), err)
	}
	if err := os.Rename(path, dst); err != nil {
		return false, fmt.Errorf("installing blob %s from %q: %w", d.Short(), path, err)
	}
	failpoint("blob-installed")
	return true, nil
}

// ingestFile copies the file at src into the Store as a blob, hashing the
// copy (the bytes that are kept are the bytes that were hashed). created
// says whether the blob is new.
func (s *Store) ingestFile(ctx context.Context, src string) (d Digest, n int64, created bool, err error) {
	tmp, err := s.copyToTemp(ctx, src)
	if err != nil {
		return Digest{}, 0, false, err
	}
	d, n, _, err = s.digestFile(ctx, tmp)
	if err == nil {
		created, err = s.installBlob(tmp, d)
	}
	if err != nil {
		os.Remove(tmp)
		return Digest{}, 0, false, err
	}
	return d, n, created, nil
}

// Workers returns how many hashing workers Commit and import use:
// LAYERFS_CONSTRUCTION_WORKERS, or the number of CPUs.
func Workers() int {
	if v := os.Getenv("LAYERFS_CONSTRUCTION_WORKERS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// parallel runs fn(i) for i in [0, n) on up to workers goroutines and returns
// the first error.
func parallel(n, workers int, fn func(i int) error) error {
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= n || first != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// copyRange copies n bytes between descriptors at the given offsets:
// copy_file_range(2), or read and write where the two files are on
// different filesystems. It returns how many bytes it copied.
func copyRange(in int, offIn int64, out int, offOut int64, n int) (int, error) {
	done := 0
	for done < n {
		c, err := unix.CopyFileRange(in, &offIn, out, &offOut, n-done, 0)
		if err == unix.EXDEV || err == unix.ENOSYS || err == unix.EOPNOTSUPP {
			break
		}
		if err != nil {
			return done, err
		}
		if c == 0 {
			return done, nil
		}
		done += c
	}
	if done == n {
		return done, nil
	}
	bp := hashBufPool.Get().(*[]byte)
	defer hashBufPool.Put(bp)
	buf := *bp
	for done < n {
		m := min(len(buf), n-done)
		r, err := unix.Pread(in, buf[:m], offIn)
		if err != nil {
			return done, err
		}
		if r == 0 {
			return done, nil
		}
		w, err := unix.Pwrite(out, buf[:r], offOut)
		done += w
		offIn += int64(w)
		offOut += int64(w)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
