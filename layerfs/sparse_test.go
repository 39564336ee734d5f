//go:build linux

package layerfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// sparseSize is the size of the sparse files the tests commit and import:
// 64 GiB, of which a few blocks are written.
var sparseSize int64 = 64 << 30

type sparseWrite struct {
	off  int64
	data []byte
}

// sparseWrites are the blocks written into the sparse file: at the start,
// unaligned inside the second chunk, in the middle, and at the very end.
func sparseWrites() []sparseWrite {
	rng := rand.New(rand.NewSource(7))
	var ws []sparseWrite
	for _, w := range []struct{ off, n int64 }{{0, 4096}, {1<<20 + 123, 5000}, {sparseSize / 2, 8192}, {sparseSize - 4096, 4096}} {
		b := make([]byte, w.n)
		rng.Read(b)
		ws = append(ws, sparseWrite{w.off, b})
	}
	return ws
}

// writeSparse makes path a sparse file of sparseSize with writes in it.
func writeSparse(t *testing.T, path string, writes []sparseWrite) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(sparseSize); err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			t.Fatal(err)
		}
	}
}

// holeLayout is the file's data extents as SEEK_DATA and SEEK_HOLE report
// them (on a Workspace, the daemon answers the kernel's LSEEK).
func holeLayout(t *testing.T, path string) [][2]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int64
	dataExtents(int(f.Fd()), 0, st.Size(), func(off, n int64) error {
		out = append(out, [2]int64{off, off + n})
		return nil
	})
	return out
}

// checkSparse checks the file at path: its size, its layout, the bytes
// written, and zeros read from a hole.
func checkSparse(t *testing.T, path string, layout [][2]int64, writes []sparseWrite) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != sparseSize {
		t.Fatalf("%s: size %v (%v), want %d", path, st.Size(), err, sparseSize)
	}
	if got := holeLayout(t, path); !reflect.DeepEqual(got, layout) {
		t.Errorf("%s: data extents %v, want %v", path, got, layout)
	}
	for _, w := range writes {
		got := make([]byte, len(w.data))
		if _, err := f.ReadAt(got, w.off); err != nil || !bytes.Equal(got, w.data) {
			t.Errorf("%s: %d bytes at %d differ (%v)", path, len(w.data), w.off, err)
		}
	}
	hole := make([]byte, 1<<20)
	if _, err := f.ReadAt(hole, sparseSize/4); err != nil || !bytes.Equal(hole, make([]byte, len(hole))) {
		t.Errorf("%s: a hole does not read as zeros (%v)", path, err)
	}
}

// blobBytes is the disk space of the blob of the one file in l.
func blobBytes(t *testing.T, s *Store, l *Layer) int64 {
	t.Helper()
	ents, err := s.loadTree(context.Background(), l.Root.Content)
	if err != nil || len(ents) != 1 {
		t.Fatalf("layer %s: %v %v", l.ID.Short(), ents, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(s.blobPath(ents[0].Content), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// testHolesKept (a case of TestFaults): a 64 GiB sparse file with a few blocks written, committed
// from a Workspace (and again after a copy-up) and imported from a
// directory, is stored with its holes (its blob takes what its data takes),
// hashing reads its data only, and it reads back on a fresh mount with the
// same bytes and the same holes.
func testHolesKept(t *testing.T) {
	ctx := context.Background()
	writes := sparseWrites()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, s *Store) (*Layer, [][2]int64, []sparseWrite)
	}{
		{"commit", func(t *testing.T, s *Store) (*Layer, [][2]int64, []sparseWrite) {
			ws := mountWS(t, s, nil)
			p := filepath.Join(ws.Mountpoint(), "sparse")
			writeSparse(t, p, writes)
			layout := holeLayout(t, p)
			res, err := ws.Commit(ctx, "sparse")
			if err != nil {
				t.Fatal(err)
			}
			if res.HashedBytes != sparseSize || res.ReadBytes > 16<<20 {
				t.Errorf("commit hashed %d bytes reading %d: holes must not be read", res.HashedBytes, res.ReadBytes)
			}
			checkSparse(t, p, layout, writes)
			// A copy-up of the committed file keeps its holes too.
			more := append(writes, sparseWrite{sparseSize / 4 * 3, bytes.Repeat([]byte("m"), 4096)})
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(more[len(more)-1].data, more[len(more)-1].off); err != nil {
				t.Fatal(err)
			}
			f.Close()
			layout = holeLayout(t, p)
			res, err = ws.Commit(ctx, "sparse, copied up")
			if err != nil {
				t.Fatal(err)
			}
			if res.ReadBytes > 16<<20 {
				t.Errorf("the second commit read %d bytes: holes must not be read", res.ReadBytes)
			}
			return res.Layer, layout, more
		}},
		{"import", func(t *testing.T, s *Store) (*Layer, [][2]int64, []sparseWrite) {
			src := t.TempDir()
			p := filepath.Join(src, "sparse")
			writeSparse(t, p, writes)
			l, err := s.Import(ctx, src, ImportOptions{Message: "sparse"})
			if err != nil {
				t.Fatal(err)
			}
			return l, holeLayout(t, p), writes
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, ProfileFast)
			l, layout, want := tc.make(t, s)
			if n := blobBytes(t, s, l); n > 4<<20 {
				t.Errorf("the blob of a file with %d data extents takes %d bytes on disk: its holes were filled", len(layout), n)
			}
			ws := mountWS(t, s, l)
			checkSparse(t, filepath.Join(ws.Mountpoint(), "sparse"), layout, want)
			if len(layout) < len(want) {
				t.Errorf("only %d data extents for %d writes: %v", len(layout), len(want), layout)
			}
		})
	}
}

// TestBlobNames: a schema-2 Store names a blob over 1 MiB by its chunked
// digest and a smaller one by its SHA-256; a schema-1 Store (written
// before chunked digests) keeps naming and checking every blob by its
// SHA-256, so its blobs still pass check.
func TestBlobNames(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	big := make([]byte, 2*blobChunk+1)
	rand.New(rand.NewSource(2)).Read(big)
	os.WriteFile(filepath.Join(src, "big"), big, 0o644)
	os.WriteFile(filepath.Join(src, "small"), []byte("small"), 0o644)
	for _, schema := range []int{1, 2} {
		dir := filepath.Join(t.TempDir(), "store")
		s, err := Init(ctx, dir, ProfileFast)
		if err != nil {
			t.Fatal(err)
		}
		if schema == 1 {
			s.db.Exec("PRAGMA user_version = 1")
			s.Close()
			if s, err = Open(ctx, dir); err != nil {
				t.Fatal(err)
			}
		}
		l, err := s.Import(ctx, src, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := s.loadTree(ctx, l.Root.Content)
		want := map[string]Digest{"big": Digest(sha256.Sum256(big)), "small": Digest(sha256.Sum256([]byte("small")))}
		if schema == 2 {
			h := sha256.New()
			h.Write([]byte(chunkedPrefix))
			h.Write(binary.AppendUvarint(nil, uint64(len(big))))
			for off := 0; off < len(big); off += blobChunk {
				sum := sha256.Sum256(big[off:min(off+blobChunk, len(big))])
				h.Write(sum[:])
			}
			var d Digest
			h.Sum(d[:0])
			want["big"] = d
		}
		for _, e := range ents {
			if e.Content != want[e.Name] {
				t.Errorf("schema %d: %s is blob %s, want %s", schema, e.Name, e.Content.Short(), want[e.Name].Short())
			}
		}
		if res, err := Check(ctx, dir, CheckFull, true); err != nil || !res.OK || res.Blobs != 2 {
			t.Errorf("schema %d: check: %v %+v", schema, err, res)
		}
		s.Close()
	}
}
