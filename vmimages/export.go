package vmimages

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
)

// Exported is what ExportDebs wrote for one lock.
type Exported struct {
	Lock     string `json:"lock"` // NAME-ARCH
	Packages int    `json:"packages"`
	Bytes    int64  `json:"bytes"`
	LockFile string `json:"lockFile"`
}

// ExportDebs writes the verified .debs of lock into out under their pool
// file names, with the lock beside them as lock-NAME-ARCH.json, so that the
// directory can be carried to another machine and given to a build there
// as a source (--deb-source DIR). Packages the cache lacks are fetched
// first, from o's sources, never relocking: an export is of exactly the
// lock. A file already in out is kept when it matches the lock, and
// replaced when it does not.
func ExportDebs(ctx context.Context, lock *manifests.PackageLock, lockBytes []byte, out string, o FetchOptions) (*Exported, error) {
	o.fillDefaults()
	sources, err := Sources(o.CacheDir, o.Sources)
	if err != nil {
		return nil, err
	}
	debs, err := fetch(ctx, o.CacheDir, lock, sources, o.Log)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	ex := &Exported{Lock: lock.Name + "-" + lock.Arch}
	for _, p := range lock.Packages {
		dst := filepath.Join(out, debName(p))
		if checkDeb(dst, p) != nil {
			tmp := dst + ".tmp"
			os.Remove(tmp)
			if err := os.Link(debs[p.Name], tmp); err != nil {
				if err := copyFile(debs[p.Name], tmp); err != nil {
					return nil, fmt.Errorf("exporting %s: %w", p.Name, err)
				}
			}
			if err := os.Rename(tmp, dst); err != nil {
				return nil, err
			}
		}
		ex.Packages++
		ex.Bytes += p.Size
	}
	ex.LockFile = filepath.Join(out, "lock-"+ex.Lock+".json")
	if err := atomicfile.WriteFile(ex.LockFile, lockBytes, 0o644); err != nil {
		return nil, err
	}
	return ex, nil
}
