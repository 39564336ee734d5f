package vmimages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
)

// FetchOptions says where a build gets its packages and what it may do
// when the lock's exact files are gone from every source.
type FetchOptions struct {
	// CacheDir holds verified .debs by hash, apt state, fresh locks and VM
	// images (default DefaultCacheDir).
	CacheDir string
	// Sources are user-given sources (directories or http(s) URLs), tried
	// after the cache and before apt and snapshot.debian.org; see Sources.
	Sources []string
	// Relock lets a build whose locked files are in no source resolve a
	// fresh lock from the archive as it is now and build from that. The
	// result says so (Relock), and the image id differs from the committed
	// lock's. Without it, such a build fails with a *MissingError.
	Relock bool
	Log    func(string, ...any)
}

func (o *FetchOptions) fillDefaults() {
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Relock records that a build used a fresh lock because the files of the
// lock it was given could not be had from any source.
type Relock struct {
	// Committed is the digest of the lock the build was given; Fresh the
	// digest of the lock it used, kept at Path.
	Committed manifests.Digest `json:"committed"`
	Fresh     manifests.Digest `json:"fresh"`
	Path      string           `json:"path"`
	// Missing names the locked packages that no source had, and Moved the
	// versions that changed (old and new side by side).
	Missing []string                  `json:"missing"`
	Moved   []manifests.PackageChange `json:"moved"`
	Reason  string                    `json:"reason"`
}

// Notice is the loud message a build prints when it relocked.
func (r *Relock) Notice(what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NOTICE: the %s is built from a FRESH package lock, not the committed one:\n", what)
	fmt.Fprintf(&b, "  %d locked package(s) are in no source (%s),\n", len(r.Missing), strings.Join(r.Missing, ", "))
	fmt.Fprintf(&b, "  so the archive's current versions were locked into %s\n", r.Path)
	fmt.Fprintf(&b, "  (lock %s instead of %s). The image id differs from the committed one. Moved:\n", r.Fresh.Short(12), r.Committed.Short(12))
	for _, c := range r.Moved {
		fmt.Fprintf(&b, "    %s\n", c)
	}
	b.WriteString("  To build the committed image instead, pass a source holding the old files (--deb-source DIR|URL,\n")
	b.WriteString("  or " + SourcesEnv + "; `sealbench image export-debs` writes one); to move the committed lock, `make relock`.")
	return b.String()
}

// packages is a lock, its exact bytes, and a verified .deb for each of its
// packages, as BuildSandbox and BuildVM consume them.
type packages struct {
	lock   *manifests.PackageLock
	bytes  []byte
	debs   map[string]string
	relock *Relock
}

// getPackages fetches lock's packages. When some are in no source it
// resolves what a fresh lock would take instead, and then either fails
// with a *MissingError that says so (o.Relock false) or builds on with
// the fresh lock, which is kept under the cache keyed by the committed
// lock's digest, so later builds reuse it (and its image id) for as long
// as its own files can be had.
func getPackages(ctx context.Context, lock *manifests.PackageLock, lockBytes []byte, o FetchOptions) (*packages, error) {
	o.fillDefaults()
	sources, err := Sources(o.CacheDir, o.Sources)
	if err != nil {
		return nil, err
	}
	debs, err := fetch(ctx, o.CacheDir, lock, sources, o.Log)
	if err == nil {
		return &packages{lock: lock, bytes: lockBytes, debs: debs}, nil
	}
	var me *MissingError
	if !errors.As(err, &me) {
		return nil, err
	}
	committed := manifests.DigestOf(lockBytes)
	path := FreshLockPath(o.CacheDir, lock, lockBytes)
	resolve := func() (*manifests.PackageLock, []byte, error) {
		o.Log("%d locked package(s) are in no source; resolving what the archive has now", len(me.Missing))
		l, err := relock(ctx, o.CacheDir, lock, time.Now(), o.Log)
		if err != nil {
			return nil, nil, err
		}
		b, err := l.Marshal()
		return l, b, err
	}
	fresh, freshBytes, ferr := reuseFreshLock(path, lock)
	kept := ferr == nil
	if !kept {
		fresh, freshBytes, ferr = resolve()
	}
	if ferr != nil {
		return nil, fmt.Errorf("%w\n(and resolving a fresh lock failed too: %v)", me, ferr)
	}
	me.Moved = manifests.DiffLocks(lock, fresh)
	if !o.Relock {
		return nil, me
	}
	debs, err = fetch(ctx, o.CacheDir, fresh, sources, o.Log)
	var stale *MissingError
	if kept && errors.As(err, &stale) {
		// The kept fresh lock has gone the way of the committed one.
		o.Log("the fresh lock kept in %s names packages that are in no source either", path)
		if fresh, freshBytes, err = resolve(); err != nil {
			return nil, fmt.Errorf("%w\n(and resolving a fresh lock failed too: %v)", me, err)
		}
		me.Moved = manifests.DiffLocks(lock, fresh)
		debs, err = fetch(ctx, o.CacheDir, fresh, sources, o.Log)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the packages of a fresh lock for %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, freshBytes, 0o644); err != nil {
		return nil, fmt.Errorf("keeping the fresh lock: %w", err)
	}
	r := &Relock{Committed: committed, Fresh: manifests.DigestOf(freshBytes), Path: path, Moved: me.Moved, Reason: me.Error()}
	for _, p := range me.Missing {
		r.Missing = append(r.Missing, p.Name+"="+p.Version)
	}
	return &packages{lock: fresh, bytes: freshBytes, debs: debs, relock: r}, nil
}

// FreshLockPath is where a fresh lock standing in for lock is kept:
// CACHE/locks/NAME-ARCH-for-<16 hex of the committed lock's digest>.json.
func FreshLockPath(cacheDir string, lock *manifests.PackageLock, lockBytes []byte) string {
	return filepath.Join(cacheDir, "locks", fmt.Sprintf("%s-%s-for-%s.json", lock.Name, lock.Arch, manifests.DigestOf(lockBytes).Short(16)))
}

// reuseFreshLock reads a fresh lock kept earlier for committed, if it is
// still one for the same image, architecture and spec.
func reuseFreshLock(path string, committed *manifests.PackageLock) (*manifests.PackageLock, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	l, err := manifests.ParsePackageLock(b)
	if err != nil {
		return nil, nil, err
	}
	if l.Name != committed.Name || l.Arch != committed.Arch || !sameSpec(l.Spec, committed.Spec) {
		return nil, nil, fmt.Errorf("%s is a lock for another image", path)
	}
	return l, b, nil
}

func sameSpec(a, b manifests.PackageSpec) bool {
	return slices.Equal(a.Roots, b.Roots) && slices.Equal(a.Exclude, b.Exclude)
}

// relock resolves a fresh lock for the same image as committed.
func relock(ctx context.Context, cacheDir string, committed *manifests.PackageLock, now time.Time, logf func(string, ...any)) (*manifests.PackageLock, error) {
	if committed.Name == "vm" {
		return LockVM(ctx, cacheDir, committed.Arch, now, logf)
	}
	return Lock(ctx, cacheDir, committed.Name, committed.Arch, committed.Spec, now, logf)
}
