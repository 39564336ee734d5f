package testenv

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Snapshot describes every file and directory under the roots (type,
// mode, size, a file's modification time and content digest, a link's
// target), so that a test can say a refused command created or changed
// nothing there: compare two with SnapshotDiff. A directory's own times
// are left out: a file made and removed again (SQLite's -shm of a
// database only read) leaves nothing, though the directory's mtime moves.
func Snapshot(t testing.TB, roots ...string) map[string]string {
	t.Helper()
	s := map[string]string{}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				s[p] = "error " + err.Error()
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			desc := fmt.Sprintf("%v", fi.Mode())
			switch {
			case fi.Mode().IsRegular():
				desc += fmt.Sprintf(" %d %d", fi.Size(), fi.ModTime().UnixNano())
				b, _ := os.ReadFile(p)
				desc += fmt.Sprintf(" %x", sha256.Sum256(b))
			case fi.Mode()&fs.ModeSymlink != 0:
				l, _ := os.Readlink(p)
				desc += " -> " + l
			}
			s[p] = desc
			return nil
		})
	}
	return s
}

// SnapshotDiff lists, sorted, what was created, changed or removed between
// two Snapshots.
func SnapshotDiff(before, after map[string]string) []string {
	var d []string
	for p, a := range after {
		if b, ok := before[p]; !ok {
			d = append(d, "created "+p)
		} else if a != b {
			d = append(d, "changed "+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			d = append(d, "removed "+p)
		}
	}
	sort.Strings(d)
	return d
}
