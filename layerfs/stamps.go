//go:build linux

package layerfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// Blob stamps: what makes the first-open check cost a stat, not a read.
//
// Hashing a 64 MiB blob on every daemon's first open of it doubled the
// time of a cold read (BenchmarkColdReadVerify). So the Store remembers,
// for each blob whose bytes it knows to be right, the blob file's stamp:
// device, inode, size, mtime and ctime. The bytes are known right when
// this Store wrote them from bytes it hashed (Commit, import) or when it
// hashed the file and found its digest (a first open, `layerfsd check`).
// A first open stats the blob; a stamp that matches is trusted, anything
// else is hashed as before.
//
// Every change made through the filesystem moves the ctime, which no
// user can set: a byte written, a truncation, a file put in the blob's
// place, a chmod. What a stamp cannot see is a change below the
// filesystem (a disk that rots, a write to the block device): `layerfsd
// check` reads every blob for that, and forgets the stamp of each bad one,
// so that the next open hashes it and answers EIO.
//
// A stamp is recorded only for a file whose ctime is older than
// stampSettle. The kernel takes ctime from a coarse clock (one tick, 4 to
// 10 ms): a file changed in the same tick as the stat that made its stamp
// would keep that ctime. Once the tick has passed, any change gives a
// newer one. Commit and import wait out the rest of stampSettle for the
// blobs they wrote (at most that, once per call); a first open hashes
// such a young blob and records nothing.
//
// The table is a cache: created on open where the database can be
// written, ignored by a LayerFS that predates it, and without it every
// first open hashes.

const stampSettle = 25 * time.Millisecond

// A stamp is stored as a fixed 40 bytes (the five numbers, big-endian),
// not as five integers, which SQLite would store in 1 to 8 bytes each by
// their size: with rows of one size, inserted in digest order, the same
// blobs stamped twice take the same pages, and the Store's bytes (an
// exact count in a run) do not depend on inode numbers or times.
const stampsTable = `CREATE TABLE IF NOT EXISTS blob_stamps (
	digest BLOB PRIMARY KEY,
	stamp BLOB NOT NULL
) WITHOUT ROWID`

// blobStamp is what identifies one version of a blob file.
type blobStamp struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

// bytes is the stamp as stored.
func (b blobStamp) bytes() []byte {
	out := make([]byte, 0, 40)
	for _, v := range []uint64{b.dev, b.ino, uint64(b.size), uint64(b.mtime), uint64(b.ctime)} {
		out = binary.BigEndian.AppendUint64(out, v)
	}
	return out
}

func stampOf(st *unix.Stat_t) blobStamp {
	return blobStamp{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}
}

// settled says whether a stamp may be recorded: its ctime is older than
// stampSettle.
func (b blobStamp) settled(now time.Time) bool {
	return now.Sub(time.Unix(0, b.ctime)) >= stampSettle
}

// initStamps creates the stamps table if it can; without it, every first
// open hashes.
func (s *Store) initStamps(ctx context.Context) {
	s.statements.Add(1)
	_, err := s.db.ExecContext(ctx, stampsTable)
	s.stamps = err == nil
}

// statBlob stats the blob d's file.
func (s *Store) statBlob(d Digest) (blobStamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(s.blobPath(d), &st); err != nil {
		return blobStamp{}, err
	}
	return stampOf(&st), nil
}

// stampHolds says whether the blob d's file is the one whose bytes were
// last known right.
func (s *Store) stampHolds(ctx context.Context, d Digest, now blobStamp) bool {
	if !s.stamps {
		return false
	}
	var b []byte
	s.statements.Add(1)
	err := s.db.QueryRowContext(ctx, "SELECT stamp FROM blob_stamps WHERE digest = ?", d[:]).Scan(&b)
	return err == nil && bytes.Equal(b, now.bytes())
}

// recordStamps remembers the stamps of blobs whose bytes are known right.
// Failing to is not an error: those blobs are hashed on their first open.
func (s *Store) recordStamps(ctx context.Context, stamps map[Digest]blobStamp) {
	if !s.stamps || len(stamps) == 0 {
		return
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, "INSERT OR REPLACE INTO blob_stamps(digest, stamp) VALUES (?, ?)")
	if err != nil {
		return
	}
	defer st.Close()
	for _, d := range sortedDigests(stamps) {
		s.statements.Add(1)
		if _, err := st.ExecContext(ctx, d[:], stamps[d].bytes()); err != nil {
			return
		}
	}
	tx.Commit()
}

// forgetStamps drops the stamps of blobs found bad (or gone).
func (s *Store) forgetStamps(ctx context.Context, ds []Digest) error {
	if !s.stamps || len(ds) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, d := range ds {
		s.statements.Add(1)
		if _, err := tx.ExecContext(ctx, "DELETE FROM blob_stamps WHERE digest = ?", d[:]); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// stampWritten records the stamps of blobs this Store has just written
// from bytes it hashed, waiting first (at most stampSettle) until the
// youngest of them has settled. A blob that changed meanwhile is left
// unstamped.
func (s *Store) stampWritten(ctx context.Context, ds []Digest) {
	if !s.stamps || len(ds) == 0 {
		return
	}
	first := make(map[Digest]blobStamp, len(ds))
	var youngest int64
	for _, d := range ds {
		b, err := s.statBlob(d)
		if err != nil {
			continue
		}
		first[d] = b
		youngest = max(youngest, b.ctime)
	}
	if wait := stampSettle - time.Since(time.Unix(0, youngest)); wait > 0 && len(first) > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	now := time.Now()
	for d, b := range first {
		if again, err := s.statBlob(d); err != nil || again != b || !again.settled(now) {
			delete(first, d)
		}
	}
	s.recordStamps(ctx, first)
}

// stampedBlobs lists the blobs that have a stamp.
func (s *Store) stampedBlobs(ctx context.Context) ([]Digest, error) {
	if !s.stamps {
		return nil, nil
	}
	return s.queryDigests(ctx, "blob stamps", "SELECT digest FROM blob_stamps")
}
