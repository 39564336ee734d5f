package vmimages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/internal/toolcache"
	"github.com/sealbench/sealbench/manifests"
)

// DefaultCacheDir is where packages, apt state, fresh locks and VM images
// are cached: internal/toolcache's directory.
func DefaultCacheDir() string { return toolcache.Dir() }

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

// fetch returns a cached .deb for every locked package. What the cache
// lacks is asked of each source in turn, each file checked against its
// locked size and SHA-256 before it enters the cache. When some package
// is in no source, the error is a *MissingError naming each one and every
// source's answer; nothing unchecked is ever left in the cache.
func fetch(ctx context.Context, cacheDir string, l *manifests.PackageLock, sources []Source, logf func(string, ...any)) (map[string]string, error) {
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
	me := &MissingError{Lock: l}
	for _, src := range sources {
		if len(missing) == 0 {
			break
		}
		logf("fetching %d of %d packages from %s", len(missing), len(l.Packages), src)
		got, why, err := fetchFrom(ctx, cacheDir, src, l, missing)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrNoApt) || strings.Contains(err.Error(), "not enough free space") {
				return nil, err
			}
			logf("%s: %v", src, err)
			me.Tried = append(me.Tried, SourceAnswer{Source: src.String(), Err: err.Error()})
			continue
		}
		var still []manifests.LockedPackage
		for _, p := range missing {
			if f, ok := got[p.Name]; ok {
				files[p.Name] = f
			} else {
				still = append(still, p)
			}
		}
		if len(got) > 0 {
			logf("%s had %d of them", src, len(got))
		}
		me.Tried = append(me.Tried, SourceAnswer{Source: src.String(), Why: why})
		missing = still
	}
	if len(missing) > 0 {
		me.Missing = missing
		return nil, me
	}
	return files, nil
}

// fetchFrom asks one source for pkgs in a private temporary directory and
// moves each file it gives, re-checked, into the cache by its hash.
func fetchFrom(ctx context.Context, cacheDir string, src Source, l *manifests.PackageLock, pkgs []manifests.LockedPackage) (map[string]string, map[string]string, error) {
	scratch.Sweep(cacheDir) // a killed fetch's directory; never a live one's
	sd, err := scratch.Make(cacheDir, "fetch")
	if err != nil {
		return nil, nil, err
	}
	defer sd.Remove()
	tmp := sd.Path
	got, why, err := src.Fetch(ctx, tmp, l, pkgs)
	if err != nil {
		return nil, nil, err
	}
	if why == nil {
		why = map[string]string{}
	}
	cached := map[string]string{}
	for _, p := range pkgs {
		f, ok := got[p.Name]
		if !ok {
			if why[p.Name] == "" {
				why[p.Name] = "not there"
			}
			continue
		}
		if err := checkDeb(f, p); err != nil {
			why[p.Name] = fmt.Sprintf("its file does not match the lock: %v", err)
			continue
		}
		path := filepath.Join(cacheDir, "debs", p.SHA256.Hex+".deb")
		if err := os.Rename(f, path); err != nil {
			return nil, nil, fmt.Errorf("caching %s: %w", p.Name, err)
		}
		cached[p.Name] = path
	}
	return cached, why, nil
}

// SourceAnswer is what one source said about the packages it was asked for.
type SourceAnswer struct {
	Source string            `json:"source"`
	Err    string            `json:"error,omitempty"` // the source as a whole failed
	Why    map[string]string `json:"why,omitempty"`   // per package it did not have
}

// MissingError says which locked packages no source had, and what each
// source answered. Moved, when known, lists the versions a fresh lock
// would take instead (old and new side by side).
type MissingError struct {
	Lock    *manifests.PackageLock
	Missing []manifests.LockedPackage
	Tried   []SourceAnswer
	Moved   []manifests.PackageChange
}

func (e *MissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d locked package(s) of the %s lock (%s) are in no source:", len(e.Missing), e.Lock.Name, e.Lock.Arch)
	for _, p := range e.Missing {
		fmt.Fprintf(&b, "\n  %s=%s (%s, %s)", p.Name, p.Version, p.Arch, p.SHA256.Short(12))
	}
	b.WriteString("\nsources tried, in order (after the cache):")
	for _, t := range e.Tried {
		if t.Err != "" {
			fmt.Fprintf(&b, "\n  %s: %s", t.Source, t.Err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s:", t.Source)
		for _, p := range e.Missing {
			if w, ok := t.Why[p.Name]; ok {
				fmt.Fprintf(&b, "\n    %s: %s", p.Name, w)
			}
		}
	}
	if len(e.Moved) > 0 {
		b.WriteString("\nthe archive has moved on to:")
		for _, c := range e.Moved {
			fmt.Fprintf(&b, "\n  %s", c)
		}
	}
	return b.String()
}

// Hint says the two ways on.
func (e *MissingError) Hint() string {
	return "either add a source that has these exact files (--deb-source DIR|URL, or " + SourcesEnv +
		"; `sealbench image export-debs` on a machine that has them writes such a directory), or re-lock with `sealbench image lock` (`make relock` in the source tree), which moves to the archive's current versions and so changes the image id"
}

func checkDeb(path string, p manifests.LockedPackage) error {
	n, got, err := manifests.HashFile(path)
	if err != nil {
		return err
	}
	if n != p.Size {
		return fmt.Errorf("size %d, the lock says %d", n, p.Size)
	}
	if got != p.SHA256 {
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

// JSONDetail adds the missing packages and each source's answers to a
// command's --json error output.
func (e *MissingError) JSONDetail() (string, any) {
	return "missingPackages", map[string]any{
		"lock": e.Lock.Name + "-" + e.Lock.Arch, "missing": e.Missing, "tried": e.Tried, "moved": e.Moved,
	}
}
