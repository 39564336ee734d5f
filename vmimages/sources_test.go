package vmimages

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// fakeDeb is a package of the synthetic lock: its bytes and where the
// test's sources keep it.
type fakeDeb struct {
	pkg  manifests.LockedPackage
	data []byte
}

// fakeLock makes a lock of synthetic packages (sources are only trusted
// for bytes that match size and SHA-256, so any bytes do).
func fakeLock(t *testing.T, names ...string) (*manifests.PackageLock, map[string]fakeDeb) {
	t.Helper()
	l := &manifests.PackageLock{
		SchemaVersion: manifests.PackageLockSchemaVersion, Kind: manifests.PackageLockKind,
		Name: "sandbox", Arch: "amd64", Spec: manifests.PackageSpec{Roots: []string{names[0]}, Exclude: []string{}},
		Time: time.Date(2026, 11, 29, 8, 39, 50, 0, time.UTC),
	}
	debs := map[string]fakeDeb{}
	for i, n := range names {
		data := []byte(strings.Repeat(fmt.Sprintf("%s-%d;", n, i), 100+i))
		archive, pool := manifests.ArchiveDebian, "pool/main/"
		if i%2 == 1 {
			archive, pool = manifests.ArchiveSecurity, "pool/updates/main/"
		}
		p := manifests.LockedPackage{
			Name: n, Version: "1:1.0-" + fmt.Sprint(i), Arch: "amd64",
			Filename: pool + n[:1] + "/" + n + "/" + n + "_1.0-" + fmt.Sprint(i) + "_amd64.deb",
			Size:     int64(len(data)), SHA256: manifests.DigestOf(data), Archive: archive,
		}
		l.Packages = append(l.Packages, p)
		debs[n] = fakeDeb{p, data}
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	return l, debs
}

// fakeSnapshot serves snapshot.debian.org's layout for the packages given:
// /archive/ARCHIVE/TIMESTAMP/POOLPATH for those first seen at or before
// TIMESTAMP (with the redirect to the snapshot's own timestamp that the
// real one answers), /mr/binary/NAME/VERSION/binfiles?fileinfo=1 and
// /file/SHA1 for all of them.
type fakeSnapshot struct {
	debs      map[string]fakeDeb
	firstSeen map[string]time.Time // by package name; zero: only by hash
	mu        sync.Mutex
	requests  []string
}

func (s *fakeSnapshot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.Path)
	s.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case len(parts) > 3 && parts[0] == "archive":
		ts, err := time.Parse("20060102T150405Z", parts[2])
		if err != nil {
			http.Error(w, "bad timestamp", http.StatusNotFound)
			return
		}
		pool := strings.Join(parts[3:], "/")
		for n, d := range s.debs {
			seen := s.firstSeen[n]
			if d.pkg.Filename != pool || d.pkg.SnapshotArchive() != parts[1] || seen.IsZero() || seen.After(ts) {
				continue
			}
			if canon := SnapshotTime(seen); canon != parts[2] {
				http.Redirect(w, r, "/archive/"+parts[1]+"/"+canon+"/"+pool, http.StatusFound)
				return
			}
			w.Write(d.data)
			return
		}
		http.NotFound(w, r)
	case len(parts) == 5 && parts[0] == "mr" && parts[1] == "binary" && parts[4] == "binfiles":
		d, ok := s.debs[parts[2]]
		if !ok || d.pkg.Version != parts[3] || r.URL.Query().Get("fileinfo") != "1" {
			http.NotFound(w, r)
			return
		}
		h := sha1.Sum(d.data)
		hash := hex.EncodeToString(h[:])
		json.NewEncoder(w).Encode(map[string]any{
			"binary": d.pkg.Name, "binary_version": d.pkg.Version,
			"result": []map[string]string{{"hash": strings.Repeat("0", 40), "architecture": "arm64"}, {"hash": hash, "architecture": "amd64"}},
			"fileinfo": map[string]any{hash: []map[string]any{{
				"archive_name": d.pkg.SnapshotArchive(), "first_seen": "20261001T000000Z",
				"name": path.Base(d.pkg.Filename), "path": "/" + path.Dir(d.pkg.Filename), "size": d.pkg.Size,
			}}},
		})
	case len(parts) == 2 && parts[0] == "file":
		for _, d := range s.debs {
			h := sha1.Sum(d.data)
			if hex.EncodeToString(h[:]) == parts[1] {
				w.Write(d.data)
				return
			}
		}
		http.NotFound(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *fakeSnapshot) asked(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if strings.Contains(r, substr) {
			n++
		}
	}
	return n
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFetchTriesEachSource gives every package of a lock a different home:
// the cache, a directory (by hash, by pool file name), a plain HTTP tree, the
// snapshot archive by path under the lock's time, the snapshot API by
// name and version, and nowhere; one package's file in the directory is
// tampered with. Everything found is verified and cached; what is not is
// named with each source's answer, and nothing unverified is cached.
func TestFetchTriesEachSource(t *testing.T) {
	lock, debs := fakeLock(t, "acache", "bdirhash", "cdirpool", "dhttp", "esnappath", "fsnapapi", "gnowhere", "htampered")
	cache := t.TempDir()
	writeFile(t, filepath.Join(cache, "debs", debs["acache"].pkg.SHA256.Hex+".deb"), debs["acache"].data)

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, debs["bdirhash"].pkg.SHA256.Hex+".deb"), debs["bdirhash"].data)
	writeFile(t, filepath.Join(dir, path.Base(debs["cdirpool"].pkg.Filename)), debs["cdirpool"].data)
	tampered := append([]byte{}, debs["htampered"].data...)
	tampered[10] ^= 1
	writeFile(t, filepath.Join(dir, path.Base(debs["htampered"].pkg.Filename)), tampered)

	tree := t.TempDir()
	writeFile(t, filepath.Join(tree, debs["dhttp"].pkg.Filename), debs["dhttp"].data)
	mirror := httptest.NewServer(http.FileServer(http.Dir(tree)))
	defer mirror.Close()

	snap := &fakeSnapshot{debs: map[string]fakeDeb{"esnappath": debs["esnappath"], "fsnapapi": debs["fsnapapi"]},
		firstSeen: map[string]time.Time{"esnappath": lock.Time.Add(-36 * time.Hour)}}
	snapSrv := httptest.NewServer(snap)
	defer snapSrv.Close()

	dirSrc, err := ParseSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	httpSrc, err := ParseSource(mirror.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	sources := []Source{dirSrc, httpSrc, &snapshotSource{base: snapSrv.URL, client: httpClient()}}
	_, err = fetch(context.Background(), cache, lock, sources, t.Logf)
	var me *MissingError
	if !errors.As(err, &me) {
		t.Fatalf("fetch: %v, want a *MissingError", err)
	}
	var missing []string
	for _, p := range me.Missing {
		missing = append(missing, p.Name)
	}
	if strings.Join(missing, " ") != "gnowhere htampered" {
		t.Errorf("missing %v, want gnowhere and htampered", missing)
	}
	msg := err.Error()
	for _, want := range []string{
		"gnowhere=1:1.0-6", "htampered=1:1.0-7",
		"directory " + dir + ":", "htampered: htampered_1.0-7_amd64.deb differs from the lock",
		"URL " + mirror.URL + ":", "snapshot " + snapSrv.URL + ":", "gnowhere: by path: ", "HTTP 404",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	if h := me.Hint(); !strings.Contains(h, "--deb-source") || !strings.Contains(h, "sealbench image lock") || !strings.Contains(h, "image id") {
		t.Errorf("hint %q does not give both ways on", h)
	}
	for _, n := range []string{"acache", "bdirhash", "cdirpool", "dhttp", "esnappath", "fsnapapi"} {
		if err := checkDeb(filepath.Join(cache, "debs", debs[n].pkg.SHA256.Hex+".deb"), debs[n].pkg); err != nil {
			t.Errorf("%s is not in the cache, verified: %v", n, err)
		}
	}
	if got, _ := filepath.Glob(filepath.Join(cache, "debs", "*")); len(got) != 6 {
		t.Errorf("cache holds %d files, want the 6 verified ones: %v", len(got), got)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".sealbench-*")); len(left) != 0 {
		t.Errorf("staging directories left: %v", left)
	}
	if snap.asked("/archive/debian-security/") == 0 || snap.asked("/mr/binary/fsnapapi/") != 1 || snap.asked("/file/") == 0 {
		t.Errorf("the snapshot was not asked by path in the right archive, then by name: %v", snap.requests)
	}
	if snap.asked("acache") != 0 || snap.asked("bdirhash") != 0 {
		t.Errorf("the snapshot was asked for packages found earlier: %v", snap.requests)
	}

	// With the two missing packages given correctly, everything comes from
	// the cache and the directory: no server is asked again.
	writeFile(t, filepath.Join(dir, path.Base(debs["htampered"].pkg.Filename)), debs["htampered"].data)
	writeFile(t, filepath.Join(dir, "debs", debs["gnowhere"].pkg.SHA256.Hex+".deb"), debs["gnowhere"].data)
	// And a fetch killed part-way left its staging directory (no live
	// fetch holds its lock): the next fetch removes it.
	killed := filepath.Join(cache, ".sealbench-fetch-0123456789ab")
	writeFile(t, filepath.Join(killed, "half.deb"), []byte("half"))
	before := len(snap.requests)
	files, err := fetch(context.Background(), cache, lock, sources, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killed); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed fetch's staging directory is still there: %v", err)
	}
	if len(files) != len(lock.Packages) || len(snap.requests) != before {
		t.Errorf("second fetch: %d files, %d more snapshot requests", len(files), len(snap.requests)-before)
	}
}

// TestUnreachableSourceIsAskedOnce: a server that is not there fails the
// whole source once, with what happened, and the next source is tried.
func TestUnreachableSourceIsAskedOnce(t *testing.T) {
	lock, debs := fakeLock(t, "aone", "btwo", "cthree")
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	dir := t.TempDir()
	for _, d := range debs {
		writeFile(t, filepath.Join(dir, path.Base(d.pkg.Filename)), d.data)
	}
	dirSrc, _ := ParseSource(dir)
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	files, err := fetch(context.Background(), t.TempDir(), lock, []Source{&snapshotSource{base: url, client: httpClient()}, dirSrc}, logf)
	if err != nil || len(files) != 3 {
		t.Fatalf("fetch: %v, %d files", err, len(files))
	}
	unreachable := 0
	for _, l := range logs {
		if strings.Contains(l, "unreachable") {
			unreachable++
		}
	}
	if unreachable != 1 {
		t.Errorf("want one 'unreachable' line for the whole source, got %d: %q", unreachable, logs)
	}
}

func TestParseSourceRefusesBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	writeFile(t, file, []byte("x"))
	for in, want := range map[string]string{
		file:                     "not a directory",
		filepath.Join(file, "x"): "not a directory",
		"/does/not/exist":        "no such file",
		"ftp://mirror/debian":    "only directories and http(s) URLs",
		"http://":                "not a usable URL",
	} {
		if _, err := ParseSource(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSource(%q) = %v, want an error saying %q", in, err, want)
		}
	}
	t.Setenv(SourcesEnv, t.TempDir()+", "+"https://mirror.example/debian")
	t.Setenv(SnapshotEnv, "off")
	srcs, err := Sources(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range srcs {
		names = append(names, strings.Fields(s.String())[0])
	}
	if strings.Join(names, " ") != "directory URL apt" {
		t.Errorf("sources from the environment with the snapshot off: %v", names)
	}
	t.Setenv(SnapshotEnv, "")
	if srcs, _ := Sources(t.TempDir(), nil); !strings.Contains(srcs[len(srcs)-1].String(), DefaultSnapshotURL) {
		t.Errorf("the last source is %s, want the snapshot", srcs[len(srcs)-1])
	}
}

// TestRelockWhenTheArchiveMovedOn takes the committed Sandbox lock and
// makes one of its packages a version the archive does not have, as a
// security update does to a lock days after it was written. Without
// Relock the build fails naming the package, each source's answer and the
// version a fresh lock takes; with it, the build goes on from a fresh lock
// kept in the cache, and a second build reuses that lock.
func TestRelockWhenTheArchiveMovedOn(t *testing.T) {
	needApt(t)
	t.Setenv(SnapshotEnv, "off")
	lock, _, err := DefaultLock("sandbox", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	gone := *lock
	gone.Packages = append([]manifests.LockedPackage{}, lock.Packages...)
	var victim *manifests.LockedPackage
	for i := range gone.Packages {
		if gone.Packages[i].Name == "dash" {
			victim = &gone.Packages[i]
		}
	}
	current := victim.Version
	victim.Version = "0.5.0-0+gone1"
	victim.SHA256 = manifests.DigestOf([]byte("a version the archive deleted"))
	gb, err := gone.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()

	_, err = getPackages(context.Background(), &gone, gb, FetchOptions{CacheDir: cache, Log: t.Logf})
	var me *MissingError
	if !errors.As(err, &me) {
		t.Fatalf("without Relock: %v, want a *MissingError", err)
	}
	wantMove := "dash 0.5.0-0+gone1 -> " + current
	if !strings.Contains(err.Error(), "dash=0.5.0-0+gone1") || !strings.Contains(err.Error(), "apt (this machine's sources):") || !strings.Contains(err.Error(), wantMove) {
		t.Errorf("the error does not name the package, apt's answer and the move %q:\n%v", wantMove, err)
	}
	if _, err := os.Stat(FreshLockPath(cache, &gone, gb)); err == nil {
		t.Errorf("a failed build kept a fresh lock")
	}

	pk, err := getPackages(context.Background(), &gone, gb, FetchOptions{CacheDir: cache, Relock: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r := pk.relock
	if r == nil || strings.Join(r.Missing, ",") != "dash=0.5.0-0+gone1" || r.Path != FreshLockPath(cache, &gone, gb) || r.Committed != manifests.DigestOf(gb) {
		t.Fatalf("relock record: %+v", r)
	}
	if len(pk.debs) != len(pk.lock.Packages) {
		t.Errorf("%d packages fetched for a fresh lock of %d", len(pk.debs), len(pk.lock.Packages))
	}
	if n := pk.lock.Packages; n[0].Archive == "" {
		t.Errorf("the fresh lock does not record each package's archive: %+v", n[0])
	}
	if !strings.Contains(r.Notice("Sandbox image"), wantMove) || !strings.Contains(r.Notice("Sandbox image"), "image id differs") {
		t.Errorf("notice:\n%s", r.Notice("Sandbox image"))
	}
	again, err := getPackages(context.Background(), &gone, gb, FetchOptions{CacheDir: cache, Relock: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if again.relock == nil || again.relock.Fresh != r.Fresh {
		t.Errorf("the second build did not reuse the fresh lock: %+v, first %s", again.relock, r.Fresh)
	}

	// When the kept fresh lock goes stale too, a build resolves again.
	stale := *pk.lock
	stale.Packages = append([]manifests.LockedPackage{}, pk.lock.Packages...)
	stale.Packages[0].Version += "+gone"
	stale.Packages[0].SHA256 = manifests.DigestOf([]byte("gone too"))
	sb, err := stale.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.Path, sb, 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := getPackages(context.Background(), &gone, gb, FetchOptions{CacheDir: cache, Relock: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if third.relock == nil || third.relock.Fresh == manifests.DigestOf(sb) || len(third.debs) != len(third.lock.Packages) {
		t.Errorf("a stale kept lock was not replaced: %+v", third.relock)
	}
	if kb, _ := os.ReadFile(r.Path); manifests.DigestOf(kb) != third.relock.Fresh {
		t.Errorf("the lock kept now is not the one the build used")
	}
}

// TestExportedDebsReproduceTheCommittedImage exports the committed Sandbox
// lock's packages, then builds with an empty cache and the export as a
// source: every package comes from the export (apt is never asked), and
// the image id is the committed one. Where the committed lock's files are
// in no source any more, it does the same with the fresh lock that stands
// in for it, and says that the committed id could not be checked.
func TestExportedDebsReproduceTheCommittedImage(t *testing.T) {
	needApt(t)
	t.Setenv(SnapshotEnv, "off")
	lock, lb, err := DefaultLock("sandbox", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "sandbox-image-amd64.golden"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.SplitN(string(golden), "\n", 2)[0]
	export := t.TempDir()
	ex, err := ExportDebs(context.Background(), lock, lb, export, FetchOptions{CacheDir: t.TempDir(), Log: t.Logf})
	var me *MissingError
	if errors.As(err, &me) {
		fresh := build(t, t.TempDir(), lock, lb)
		if lb, err = os.ReadFile(fresh.Lock); err != nil {
			t.Fatal(err)
		}
		if lock, err = manifests.ParsePackageLock(lb); err != nil {
			t.Fatal(err)
		}
		want = fresh.ID.String()
		t.Logf("REPRODUCIBILITY: the committed image id could NOT be checked from exported packages (%d are in no source); checking the fresh lock %s instead", len(me.Missing), fresh.LockDigest.Short(12))
		ex, err = ExportDebs(context.Background(), lock, lb, export, FetchOptions{CacheDir: t.TempDir(), Log: t.Logf})
	}
	if err != nil {
		t.Fatal(err)
	}
	if ex.Packages != len(lock.Packages) {
		t.Fatalf("exported %d of %d packages", ex.Packages, len(lock.Packages))
	}
	if b, err := os.ReadFile(ex.LockFile); err != nil || string(b) != string(lb) {
		t.Errorf("the lock beside the export differs: %v", err)
	}
	dir, m := testBundle(t)
	var logs []string
	info, err := BuildSandbox(context.Background(), SandboxOptions{
		Bundle: dir, Manifest: m, Lock: lock, LockBytes: lb, CacheDir: t.TempDir(), Sources: []string{export}, OutDir: t.TempDir(),
		Log: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)); t.Logf(f, a...) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if strings.Contains(l, "apt") {
			t.Errorf("apt was asked although the export has every package: %q", l)
		}
	}
	if info.ID.String() != want {
		t.Errorf("image id %s from the exported packages, want %s", info.ID, want)
	}
	if me == nil {
		t.Logf("REPRODUCIBILITY: checked the committed image id from exported packages alone (an empty cache, apt never asked): %s", info.ID)
	}
}
