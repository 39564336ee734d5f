package vmimages

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// DefaultCacheDir is where packages and apt state are cached.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sealbench")
	}
	return filepath.Join(os.TempDir(), "sealbench-cache")
}

// Lock resolves spec through apt for arch and returns a new lock.
func Lock(ctx context.Context, cacheDir, name, arch string, spec manifests.PackageSpec, now time.Time, logf func(string, ...any)) (*manifests.PackageLock, error) {
	a, err := newApt(cacheDir, arch)
	if err != nil {
		return nil, err
	}
	logf("updating the %s package lists (the host's apt sources, private state in %s)", arch, a.root)
	if err := a.update(ctx); err != nil {
		return nil, err
	}
	pkgs, err := a.resolve(ctx, spec)
	if err != nil {
		return nil, err
	}
	l := &manifests.PackageLock{
		SchemaVersion: manifests.PackageLockSchemaVersion, Kind: manifests.PackageLockKind,
		Name: name, Arch: arch, Spec: spec, Time: now.UTC().Truncate(time.Second), Packages: pkgs,
	}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("resolved an invalid lock (a bug): %w", err)
	}
	logf("resolved %d packages for %s", len(pkgs), arch)
	return l, nil
}

// fetch returns a cached .deb for every locked package, downloading the
// missing ones through apt and checking each against its locked size and
// SHA-256. A package that does not match is an error naming it, and nothing
// of it is left in the cache.
func fetch(ctx context.Context, cacheDir string, l *manifests.PackageLock, logf func(string, ...any)) (map[string]string, error) {
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{}
	var missing []manifests.LockedPackage
	for _, p := range l.Packages {
		path := filepath.Join(debs, p.SHA256.Hex+".deb")
		if err := checkDeb(path, p); err == nil {
			files[p.Name] = path
			continue
		}
		os.Remove(path) // absent, or damaged
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return files, nil
	}
	logf("fetching %d of %d packages through apt", len(missing), len(l.Packages))
	a, err := newApt(cacheDir, l.Arch)
	if err != nil {
		return nil, err
	}
	// apt does not fail cleanly on a full disk (it can wait forever), so
	// make sure first that what it will write fits.
	need := int64(0)
	for _, p := range missing {
		need += p.Size
	}
	if !a.hasLists() {
		need += listsSize
	}
	if err := checkSpace(cacheDir, need); err != nil {
		return nil, err
	}
	if !a.hasLists() {
		if err := a.update(ctx); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp(cacheDir, ".fetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	got, err := a.download(ctx, tmp, missing)
	if err != nil {
		return nil, err
	}
	for _, p := range missing {
		if err := checkDeb(got[p.Name], p); err != nil {
			return nil, fmt.Errorf("package %s=%s from the mirror does not match the lock: %w; if the archive really changed, refresh the lock with `sealbench image lock`", p.Name, p.Version, err)
		}
		path := filepath.Join(debs, p.SHA256.Hex+".deb")
		if err := os.Rename(got[p.Name], path); err != nil {
			return nil, fmt.Errorf("caching %s: %w", p.Name, err)
		}
		files[p.Name] = path
	}
	return files, nil
}

func checkDeb(path string, p manifests.LockedPackage) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != p.Size {
		return fmt.Errorf("size %d, the lock says %d", n, p.Size)
	}
	if got := manifests.DigestFromHash(h); got != p.SHA256 {
		return fmt.Errorf("SHA-256 %s, the lock says %s", got, p.SHA256)
	}
	return nil
}

// listsSize is a generous bound on one architecture's package lists.
const listsSize = 128 << 20

// checkSpace fails when dir's filesystem has less than need bytes free
// (with a margin for temporary copies).
func checkSpace(dir string, need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if want := need*2 + 16<<20; free < want {
		return fmt.Errorf("not enough free space in %s for the packages: %d MiB free, %d MiB needed; free some space or pass --cache on a larger filesystem", dir, free>>20, want>>20)
	}
	return nil
}
