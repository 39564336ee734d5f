//go:build linux

package layerfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestBlobStamps: a blob this Store wrote (import, Commit) is trusted on a
// new daemon's first open by its stamp, without a read; a byte changed
// through the filesystem, even with the mtime put back, is caught (the
// ctime moved) and is EIO; a change the stamp cannot see (bytes changed
// below the filesystem, played here by restamping the changed file) is
// found by CheckBlobs, which forgets the stamp so that the next open
// answers EIO; the blob restored reads again.
func TestBlobStamps(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	src := t.TempDir()
	data := make([]byte, 2*blobChunk+3)
	rand.New(rand.NewSource(5)).Read(data)
	os.WriteFile(filepath.Join(src, "base"), data, 0o644)
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ents, err := s.loadTree(ctx, l.Root.Content)
	if err != nil || len(ents) != 1 {
		t.Fatalf("base layer: %v %v", ents, err)
	}
	d := ents[0].Content

	// read opens the file as a new daemon would (a Store opened afresh,
	// so nothing is remembered in memory) and says how many bytes the
	// check read.
	read := func(l *Layer, name string) ([]byte, int64, error) {
		t.Helper()
		s2, err := Open(ctx, s.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		ws := mountWS(t, s2, l)
		b, rerr := os.ReadFile(filepath.Join(ws.Mountpoint(), name))
		if _, err := ws.Unmount(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		return b, s2.verifiedBytes.Load(), rerr
	}

	if b, n, err := read(l, "base"); err != nil || !bytes.Equal(b, data) || n != 0 {
		t.Fatalf("an imported blob: %d bytes, %v; the check read %d bytes, want the right bytes and none read", len(b), err, n)
	}

	// A Commit's blob: a new file, moved into the blobs.
	ws := mountWS(t, s, l)
	more := bytes.Repeat([]byte("committed\n"), 1000)
	if err := os.WriteFile(filepath.Join(ws.Mountpoint(), "more"), more, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ws.Commit(ctx, "more")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Unmount(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if b, n, err := read(res.Layer, "more"); err != nil || !bytes.Equal(b, more) || n != 0 {
		t.Fatalf("a committed blob: %q, %v; the check read %d bytes, want the right bytes and none read", b, err, n)
	}

	// A byte changed with the mtime put back: the ctime tells.
	p := s.blobPath(d)
	st0, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	flip := func() {
		t.Helper()
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := []byte{0}
		if _, err := f.ReadAt(b, blobChunk+1); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if _, err := f.WriteAt(b, blobChunk+1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Chtimes(p, st0.ModTime(), st0.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	flip()
	if b, n, err := read(l, "base"); !errors.Is(err, syscall.EIO) || n == 0 {
		t.Errorf("a flipped byte, mtime put back: %d bytes, %v, %d bytes read to check; want EIO after a read", len(b), err, n)
	}
	flip() // put back
	if b, _, err := read(l, "base"); err != nil || !bytes.Equal(b, data) {
		t.Errorf("the blob restored: %d bytes, %v; want its bytes", len(b), err)
	}

	// A change below the filesystem: the stamp holds, CheckBlobs reads.
	flip()
	now, err := s.statBlob(d)
	if err != nil {
		t.Fatal(err)
	}
	s.recordStamps(ctx, map[Digest]blobStamp{d: now})
	if !s.stampHolds(ctx, d, now) {
		t.Fatal("the restamped blob's stamp does not hold")
	}
	bc, err := s.CheckBlobs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(bc.Bad) != 1 || bc.Bad[0].Digest != d.String() {
		t.Errorf("CheckBlobs: %+v, want blob %s bad", bc.Bad, d.Short())
	}
	if b, n, err := read(l, "base"); !errors.Is(err, syscall.EIO) || n == 0 {
		t.Errorf("after check found the blob bad: %d bytes, %v, %d bytes read to check; want EIO after a read", len(b), err, n)
	}
}

// TestStampsWaitForTheClock: a stamp is recorded only for a file whose
// ctime is older than stampSettle, so that a change in the same tick of
// the kernel's coarse clock cannot keep the stamp; stampWritten waits for
// that, and a first open's hash of a young file records nothing.
func TestStampsWaitForTheClock(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	data := []byte("young blob\n")
	d := Digest(sha256.Sum256(data))
	p := s.blobPath(d)
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
	before, err := s.statBlob(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, good, err := s.hashBlob(ctx, d, before); err != nil || good != (blobStamp{}) {
		t.Errorf("hashing a blob written just now: stamp %+v, %v; want no stamp to record", good, err)
	}
	s.stampWritten(ctx, []Digest{d})
	now, err := s.statBlob(d)
	if err != nil {
		t.Fatal(err)
	}
	if !now.settled(time.Now()) || !s.stampHolds(ctx, d, now) {
		t.Errorf("after stampWritten: settled %v, stamp holds %v; want both", now.settled(time.Now()), s.stampHolds(ctx, d, now))
	}
}

// TestSameImportSameBytes: the same tree imported into fresh Stores gives
// databases of the same size. A run compares the Store's bytes across
// targets as an exact count; rows inserted in map order (trees, stamps)
// or stamps whose stored size follows their inode numbers made it vary
// by a few pages with trees of a few thousand files.
func TestSameImportSameBytes(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	for d := 0; d < 32; d++ {
		dir := filepath.Join(src, fmt.Sprintf("d%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < 64; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", f)), []byte(fmt.Sprintf("file %d/%d\n", d, f)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sizes []int64
	for i := 0; i < 4; i++ {
		s := newStore(t, ProfileFast)
		if _, err := s.Import(ctx, src, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		if stamped, err := s.stampedBlobs(ctx); err != nil || len(stamped) != 2048 {
			t.Fatalf("%d stamps, %v; want one per blob", len(stamped), err)
		}
		u, err := s.Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, u.DBBytes)
	}
	for _, n := range sizes[1:] {
		if n != sizes[0] {
			t.Fatalf("the same tree imported four times: database bytes %v, want one size", sizes)
		}
	}
}
