//go:build linux

package layerfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, so binaries stay static

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// Profile says how hard a Store works to survive a crash.
type Profile = daemonapi.Profile

// The profiles (daemonapi says what each survives; synchronous says how).
const (
	ProfileDurable    = daemonapi.ProfileDurable
	ProfileFast       = daemonapi.ProfileFast
	ProfileDisposable = daemonapi.ProfileDisposable
)

// ParseProfile parses a profile name.
func ParseProfile(s string) (Profile, error) { return daemonapi.ParseProfile(s) }

// synchronous is the SQLite synchronous setting of a profile.
func synchronous(p Profile) string {
	switch p {
	case ProfileDurable:
		return "FULL"
	case ProfileFast:
		return "NORMAL"
	default:
		return "OFF"
	}
}

// SchemaVersion is the version of the database schema this code writes. A
// Store with a newer schema is refused with ErrNewerSchema. Schema 2 has
// schema 1's tables; it names blobs over 1 MiB by their chunked digest
// (sparse.go), so that hashing skips holes. Schema 1 Stores are still read
// and written, with plain SHA-256 names.
const SchemaVersion = 2

const (
	dbName       = "layerfs.db"
	blobsDir     = "blobs"
	tmpDir       = "tmp"
	overlaysDir  = "overlay"
	storeFormat  = "layerfs-store"
	lockName     = "mount.lock"
	mountInfoNam = "mount.json"
)

var (
	// ErrNotStore says a directory is not a LayerFS Store.
	ErrNotStore = errors.New("not a LayerFS store")
	// ErrNewerSchema says a Store was written by a newer LayerFS.
	ErrNewerSchema = errors.New("store schema is newer than this layerfsd supports")
	// ErrNotFound says a Layer does not exist.
	ErrNotFound = errors.New("not found")
	// ErrBadStoreDir says Init was given a directory it may not use: one
	// that is not empty, or a path that is not a directory.
	ErrBadStoreDir = errors.New("a new store needs a directory that does not exist or is empty")
)

const schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE blobs (digest BLOB PRIMARY KEY, size INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE trees (digest BLOB PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE layers (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	parent TEXT NOT NULL,
	root BLOB NOT NULL,
	message TEXT NOT NULL,
	time_ns INTEGER NOT NULL,
	links BLOB NOT NULL
);
`

// Store is an open LayerFS Store. It is safe for concurrent use.
type Store struct {
	dir     string
	db      *sql.DB
	profile Profile
	schema  int // the database's user_version: how blobs are named

	statements atomic.Int64 // SQL statements executed
	getTree    *sql.Stmt

	// verified holds the blobs this process has checked against their
	// digests (Digest → struct{}); verifying serializes the first check
	// of each (Digest → *sync.Mutex). See verify.go.
	verified, verifying sync.Map
	verifiedBytes       atomic.Int64 // bytes read to verify blobs
	stamps              bool         // the blob_stamps table is there (stamps.go)
}

// Dir returns the Store's directory.
func (s *Store) Dir() string { return s.dir }

// Profile returns the Store's profile.
func (s *Store) Profile() Profile { return s.profile }

// Statements returns how many SQL statements this Store has executed.
func (s *Store) Statements() int64 { return s.statements.Load() }

func dsn(path string, p Profile) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+synchronous(p)+")")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Init creates a new Store in dir, which must not exist or be empty.
func Init(ctx context.Context, dir string, profile Profile) (*Store, error) {
	if _, err := ParseProfile(string(profile)); err != nil {
		return nil, err
	}
	// Refused before anything is created.
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("initializing store in %q: %w (it is a file)", dir, ErrBadStoreDir)
	} else if err == nil {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading store directory %q: %w", dir, err)
		}
		if len(ents) != 0 {
			what := "a Store already"
			if _, err := os.Stat(filepath.Join(dir, dbName)); err != nil {
				what = fmt.Sprintf("%d entries, %s among them", len(ents), ents[0].Name())
			}
			return nil, fmt.Errorf("initializing store in %q: %w (it is not empty: it holds %s); give --store a new or empty directory", dir, ErrBadStoreDir, what)
		}
	} else if errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("initializing store in %q: %w (a parent is a file)", dir, ErrBadStoreDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating store directory %q: %w", dir, err)
	}
	for _, d := range []string{tmpDir, overlaysDir} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("initializing store in %q: %w", dir, err)
		}
	}
	// All 256 fan-out directories up front: installing a blob is then one
	// rename, never a mkdir.
	for i := 0; i < 256; i++ {
		if err := os.MkdirAll(filepath.Join(dir, blobsDir, fmt.Sprintf("%02x", i)), 0o755); err != nil {
			return nil, fmt.Errorf("initializing store in %q: %w", dir, err)
		}
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, dbName), profile))
	if err != nil {
		return nil, fmt.Errorf("creating database in %q: %w", dir, err)
	}
	db.SetMaxOpenConns(1)
	// Schema, version and the format marker in one transaction: a Store
	// whose init was interrupted has no marker and Open refuses it.
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		_, err = tx.ExecContext(ctx, schema)
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES ('format', ?), ('profile', ?), ('created', ?)`,
				storeFormat, string(profile), time.Now().UTC().Format(createdLayout))
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(SchemaVersion))
		}
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
	}
	db.Close()
	if err != nil {
		return nil, fmt.Errorf("creating database in %q: %w", dir, err)
	}
	if profile == ProfileDurable {
		if err := atomicfile.SyncDir(dir); err != nil {
			return nil, err
		}
	}
	return Open(ctx, dir)
}

// OpenOptions say how Open checks a Store.
type OpenOptions struct {
	// Check is how much of the database is checked before the Store is
	// used: CheckQuick (the default) or CheckFull.
	Check CheckLevel
}

// Open opens an existing Store after a quick check of its database
// (CheckQuick). It refuses a directory that is not a Store (ErrNotStore),
// a Store with a newer schema (ErrNewerSchema) and a damaged one
// (ErrDamaged, a *DamageError).
func Open(ctx context.Context, dir string) (*Store, error) {
	return OpenWith(ctx, dir, OpenOptions{})
}

// OpenWith opens an existing Store, checking it as opts say.
func OpenWith(ctx context.Context, dir string, opts OpenOptions) (*Store, error) {
	path := filepath.Join(dir, dbName)
	if st, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("opening store %q: %w (the directory does not exist; create one with `layerfsd init`)", dir, ErrNotStore)
	} else if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", dir, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("opening store %q: %w (not a directory; give --store a Store's directory, or create one with `layerfsd init`)", dir, ErrNotStore)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("opening store %q: %w (no %s; create one with `layerfsd init`)", dir, ErrNotStore, dbName)
	} else if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", dir, err)
	}
	// A database file that is not SQLite at all is a damaged Store where
	// the directory has a Store's layout, and something else otherwise.
	problems, isSQLite, err := checkHeader(path)
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", dir, err)
	}
	_, blobsErr := os.Stat(filepath.Join(dir, blobsDir))
	if !isSQLite && blobsErr != nil {
		return nil, fmt.Errorf("opening store %q: %w (%s)", dir, ErrNotStore, strings.Join(problems, "; "))
	}
	if len(problems) > 0 {
		return nil, &DamageError{Store: dir, Check: "header", Problems: problems}
	}
	// First look with a plain connection: the profile is in the database.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", dir, err)
	}
	var version int
	var format, profile string
	err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	if err == nil && version > SchemaVersion {
		db.Close()
		return nil, fmt.Errorf("opening store %q: %w (store schema %d, this layerfsd supports up to %d; use a newer layerfsd)", dir, ErrNewerSchema, version, SchemaVersion)
	}
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'format'").Scan(&format)
	}
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'profile'").Scan(&profile)
	}
	if isCorrupt(err) {
		db.Close()
		return nil, &DamageError{Store: dir, Check: "reading", Problems: []string{err.Error()}}
	}
	if err != nil || format != storeFormat || version < 1 {
		db.Close()
		return nil, fmt.Errorf("opening store %q: %w (database %s has no LayerFS format marker: %v)", dir, ErrNotStore, dbName, err)
	}
	// The check, before the Store is used (and so before any mount's
	// timed window): quick_check where the database is small enough for
	// it to cost little, integrity_check when asked.
	if opts.Check == CheckFull || opts.Check == CheckQuick && dbBytes(path) <= QuickCheckMaxBytes {
		problems, err := pragmaCheck(ctx, db, opts.Check)
		if err != nil && !isCorrupt(err) {
			db.Close()
			return nil, fmt.Errorf("opening store %q: %s: %w", dir, opts.Check, err)
		}
		if err != nil {
			problems = append(problems, err.Error())
		}
		if len(problems) > 0 {
			db.Close()
			return nil, &DamageError{Store: dir, Check: opts.Check.String(), Problems: problems}
		}
	}
	db.Close()
	p, err := ParseProfile(profile)
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", dir, err)
	}
	db, err = sql.Open("sqlite", dsn(path, p))
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", dir, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s := &Store{dir: dir, db: db, profile: p, schema: version}
	s.getTree, err = db.PrepareContext(ctx, "SELECT data FROM trees WHERE digest = ?")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %q: preparing statements: %w", dir, err)
	}
	s.initStamps(ctx)
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.getTree.Close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing store %q: %w", s.dir, err)
	}
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns its verdict ("ok"
// when the database is sound).
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	s.statements.Add(1)
	rows, err := s.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return "", fmt.Errorf("checking integrity of %q: %w", s.dir, err)
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		if out != "" {
			out += "\n"
		}
		out += line
	}
	return out, rows.Err()
}

// loadTree returns the entries of a tree object.
func (s *Store) loadTree(ctx context.Context, d Digest) ([]Entry, error) {
	if d == emptyTree {
		return nil, nil
	}
	s.statements.Add(1)
	var data []byte
	if err := s.getTree.QueryRowContext(ctx, d[:]).Scan(&data); err != nil {
		return nil, fmt.Errorf("loading tree %s from %q: %w", d.Short(), s.dir, err)
	}
	return decodeTree(data, d)
}

// blobPath is where the blob with digest d lives.
func (s *Store) blobPath(d Digest) string {
	h := d.String()
	return filepath.Join(s.dir, blobsDir, h[:2], h)
}

// Usage is how much a Store holds.
type Usage = daemonapi.Usage

// createdLayout is the Store's creation time in its meta table: RFC 3339
// with all nine digits of the nanoseconds, so that the row is one length
// whenever the Store was made (time.RFC3339Nano drops trailing zeros).
const createdLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Usage measures the Store. Its database is measured by the bytes its
// rows hold (dbstat's payload, what the WAL holds included), not by its
// files' sizes or its pages: the files depend on when a checkpoint last
// copied pages from the WAL into the main file, the pages on the order in
// which concurrent writers' rows arrived (how the B-trees split), and the
// Store's bytes are an exact count in a run.
func (s *Store) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	s.statements.Add(1)
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT COALESCE(SUM(payload), 0) FROM dbstat WHERE aggregate = TRUE),
		(SELECT COALESCE(SUM(size), 0) FROM blobs), (SELECT COUNT(*) FROM blobs),
		(SELECT COUNT(*) FROM trees), (SELECT COUNT(*) FROM layers)`).Scan(&u.DBBytes, &u.BlobBytes, &u.Blobs, &u.Trees, &u.Layers)
	if err != nil {
		return u, fmt.Errorf("measuring store %q: %w", s.dir, err)
	}
	return u, nil
}

// syncBlobs makes every blob written so far durable, for the Durable profile:
// one syncfs(2) of the Store's filesystem instead of one fsync per blob.
func (s *Store) syncBlobs() error {
	if s.profile != ProfileDurable {
		return nil
	}
	f, err := os.Open(filepath.Join(s.dir, blobsDir))
	if err != nil {
		return fmt.Errorf("syncing blobs of %q: %w", s.dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing blobs of %q: %w", s.dir, err)
	}
	return nil
}
