package bundle

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// tarEntries lists every path a bundle's tar holds below its top
// directory, sorted: the directories, the files, and the bundle's own files.
func tarEntries(m *manifests.BundleManifest) (dirs map[string]bool, all []string) {
	dirs = map[string]bool{}
	for _, d := range m.Dirs() {
		dirs[d] = true
		all = append(all, d)
	}
	for _, f := range m.Files {
		all = append(all, f.Path)
	}
	all = append(all, manifests.ManifestFile, manifests.SignatureFile, manifests.SumsFile)
	sort.Strings(all)
	return dirs, all
}

// writeTarFile writes the deterministic tar of the bundle in srcDir, named
// name, to a temporary file in outDir, and returns that file's path and the
// tar's digest. Entries are sorted, owned by uid/gid 0 with no names, and
// carry the manifest's source time.
func writeTarFile(outDir, srcDir, name string, m *manifests.BundleManifest) (string, manifests.Digest, error) {
	f, err := os.CreateTemp(outDir, "."+name+".tar.tmp-")
	if err != nil {
		return "", manifests.Digest{}, fmt.Errorf("writing bundle tar: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	if err := writeTar(io.MultiWriter(f, h), srcDir, name, m); err != nil {
		return "", manifests.Digest{}, fmt.Errorf("writing bundle tar: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return "", manifests.Digest{}, err
	}
	if err := f.Sync(); err != nil {
		return "", manifests.Digest{}, err
	}
	if err := f.Close(); err != nil {
		return "", manifests.Digest{}, err
	}
	if err := os.Chtimes(f.Name(), m.Source.Time, m.Source.Time); err != nil {
		return "", manifests.Digest{}, err
	}
	ok = true
	return f.Name(), manifests.DigestFromHash(h), nil
}

func writeTar(w io.Writer, srcDir, name string, m *manifests.BundleManifest) error {
	tw := tar.NewWriter(w)
	mtime := m.Source.Time.UTC().Truncate(time.Second)
	hdr := func(p string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{
			Typeflag: typ, Name: p, Mode: mode, Size: size, ModTime: mtime,
			Uid: 0, Gid: 0, Format: tar.FormatUSTAR,
		}
	}
	if err := tw.WriteHeader(hdr(name+"/", tar.TypeDir, 0o755, 0)); err != nil {
		return err
	}
	dirs, all := tarEntries(m)
	for _, rel := range all {
		if dirs[rel] {
			if err := tw.WriteHeader(hdr(name+"/"+rel+"/", tar.TypeDir, 0o755, 0)); err != nil {
				return err
			}
			continue
		}
		mode := int64(0o644)
		if f, ok := m.File(rel); ok {
			mode = int64(f.Mode)
		}
		if err := copyIntoTar(tw, filepath.Join(srcDir, filepath.FromSlash(rel)), hdr(path.Join(name, rel), tar.TypeReg, mode, 0)); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyIntoTar(tw *tar.Writer, file string, h *tar.Header) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = fi.Size()
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	return nil
}
