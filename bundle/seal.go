package bundle

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/manifests"
)

// ManifestSigner signs manifest bytes, returning a manifest.sig file's contents.
type ManifestSigner interface {
	SignManifest(manifest []byte) ([]byte, error)
}

// SealOptions says what to seal and where to put it.
type SealOptions struct {
	// Source is the module root; empty means the one above the working directory.
	Source string
	// OutDir receives build-linux-<hash>/ and build-linux-<hash>.tar.
	OutDir string
	// Signer signs the manifest. Required.
	Signer ManifestSigner
	// GoBinary is the go command; empty means "go" on PATH.
	GoBinary string
	// BuildEnv is added to the go command's environment (GOCACHE, for
	// example). The pinned build settings always win over it.
	BuildEnv []string
	// SuiteDirs are directories of the user's own suites (suite.json and
	// its scripts), sealed at suites/NAME/ beside the built-in ones.
	SuiteDirs []string
	// Log receives a line for each step; nil discards them.
	Log func(format string, args ...any)
}

// SealResult describes a sealed bundle.
type SealResult struct {
	Name           string                    `json:"name"`
	Dir            string                    `json:"dir"`
	Tar            string                    `json:"tar"`
	TarDigest      manifests.Digest          `json:"tarDigest"`
	ManifestDigest manifests.Digest          `json:"manifestDigest"`
	Manifest       *manifests.BundleManifest `json:"-"`
	Signature      []byte                    `json:"-"` // manifest.sig's contents
	Source         manifests.BundleSource    `json:"source"`
	DirtyFiles     []string                  `json:"dirtyFiles,omitempty"`
	Files          int                       `json:"files"`
	Bytes          int64                     `json:"bytes"`
	Elapsed        time.Duration             `json:"elapsedNanos"`
}

// Seal builds every part for every platform, copies the cell bodies, writes
// and signs the manifest, and writes the bundle directory and its tar into
// opts.OutDir. An existing bundle of the same name is replaced. On failure
// nothing is left in OutDir but what was there before.
func Seal(ctx context.Context, opts SealOptions) (res *SealResult, err error) {
	start := time.Now()
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.Signer == nil {
		return nil, fmt.Errorf("sealing: no signer")
	}
	if opts.OutDir == "" {
		return nil, fmt.Errorf("sealing: no output directory")
	}
	goBin := opts.GoBinary
	if goBin == "" {
		goBin = "go"
	}
	root, err := SourceRoot(opts.Source)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(opts.OutDir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%w: the output directory %s is a file", ErrUnusable, opts.OutDir)
	}
	src, err := ReadSource(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("sealing %s: %w", root, err)
	}
	ver := sealedVersion(src)
	if src.Dirty {
		logf("warning: the source tree is dirty; the bundle is marked dirty and cannot be traced to a commit:")
		for _, f := range src.DirtyFiles {
			logf("  %s", f)
		}
	}
	gover, err := goVersion(ctx, goBin, root)
	if err != nil {
		return nil, err
	}
	logf("sealing %s, version %s, with %s", root, ver, gover)

	made, err := mkdirAll(opts.OutDir)
	if err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	defer func() {
		if err != nil && made != "" {
			removeEmpty(made, opts.OutDir)
		}
	}()
	// A seal that was stopped (kill -9 included) left its staging
	// directory; this one removes it, and never a live seal's.
	swept, err := scratch.Sweep(opts.OutDir)
	for _, d := range swept {
		logf("removed %s, left by a seal that was stopped", d)
	}
	if err != nil {
		logf("warning: %v", err)
	}
	work, err := scratch.Make(opts.OutDir, "seal")
	if err != nil {
		return nil, err
	}
	defer work.Remove()
	tmp := filepath.Join(work.Path, "bundle")
	// The go command's own work directory goes inside ours too.
	goTmp := filepath.Join(work.Path, "go-tmp")
	if err := os.Mkdir(goTmp, 0o700); err != nil {
		return nil, err
	}
	env := append(slices.Clone(opts.BuildEnv), "GOTMPDIR="+goTmp)

	flags := buildFlags(ver)
	source := manifests.BundleSource{
		Module:     Module,
		Version:    ver,
		Commit:     src.Commit,
		Dirty:      src.Dirty,
		Time:       src.Time,
		GoVersion:  gover,
		BuildFlags: flags,
		BuildEnv:   buildEnv,
	}
	for _, p := range Platforms {
		t := time.Now()
		if err := buildPlatform(ctx, goBin, root, p, flags, env, filepath.Join(tmp, "bin", p.Dir())); err != nil {
			return nil, err
		}
		source.Platforms = append(source.Platforms, p.String())
		logf("built %d part(s) for %s in %.1fs", len(PartsFor(p)), p, time.Since(t).Seconds())
	}
	if err := copyCells(filepath.Join(root, CellsSourceDir), filepath.Join(tmp, CellsDir)); err != nil {
		return nil, err
	}
	if err := copySuites(filepath.Join(root, SuitesSourceDir), opts.SuiteDirs, filepath.Join(tmp, manifests.SuitesDir)); err != nil {
		return nil, err
	}
	res, err = Assemble(tmp, opts.OutDir, source, opts.Signer, logf)
	if err != nil {
		return nil, err
	}
	res.DirtyFiles = src.DirtyFiles
	res.Elapsed = time.Since(start)
	logf("wrote %s and %s in %.1fs", res.Dir, res.Tar, res.Elapsed.Seconds())
	return res, nil
}

// Assemble turns a staged directory (bin/ and cells/ in place) on
// outDir's file system into a bundle: fixed modes, the manifest, its
// signature, SHA256SUMS and fixed mtimes; then writes the tar beside the
// staged directory and moves both into place. The staged directory is gone
// afterwards, whatever happens. Seal calls it after its builds, on a
// directory inside its staging directory (package scratch), so that its
// temporaries are there too; tests make small bundles with it.
func Assemble(staged, outDir string, source manifests.BundleSource, signer ManifestSigner, logf func(string, ...any)) (res *SealResult, err error) {
	defer func() {
		if err != nil {
			os.RemoveAll(staged)
		}
	}()
	m := &manifests.BundleManifest{
		SchemaVersion: manifests.BundleSchemaVersion,
		Kind:          manifests.BundleKind,
		Source:        source,
	}
	// Every file gets a fixed mode: the bytes of the bundle must not depend
	// on the umask of the machine that sealed it.
	err = filepath.WalkDir(staged, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel := filepath.ToSlash(must(filepath.Rel(staged, p)))
		mode := manifests.FileMode(0o644)
		if path.Dir(rel) != "." && path.Dir(path.Dir(rel)) == "bin" {
			mode = 0o755
		}
		if err := os.Chmod(p, fs.FileMode(mode)); err != nil {
			return err
		}
		size, dg, err := manifests.HashFile(p)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, manifests.BundleFile{Path: rel, Size: size, Mode: mode, Digest: dg})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hashing bundle files: %w", err)
	}
	m.SortFiles()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("sealing produced an invalid manifest (a bug): %w", err)
	}
	mb, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	sig, err := signer.SignManifest(mb)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		manifests.ManifestFile:  mb,
		manifests.SignatureFile: sig,
		manifests.SumsFile:      m.SHA256SUMS(),
	} {
		if err := os.WriteFile(filepath.Join(staged, name), data, 0o644); err != nil {
			return nil, err
		}
		if err := os.Chmod(filepath.Join(staged, name), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(staged, 0o755); err != nil { // MkdirTemp makes it 0700
		return nil, err
	}
	if err := setTimes(staged, source.Time); err != nil {
		return nil, err
	}
	mdg := manifests.DigestOf(mb)
	name := manifests.BundleName(mb)
	logf("signed manifest %s: bundle %s", mdg, name)

	final := filepath.Join(outDir, name)
	tarPath := final + ".tar"
	tarTmp, tarDigest, err := writeTarFile(filepath.Dir(staged), staged, name, m)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.Remove(tarTmp)
		}
	}()
	if err := replaceDir(staged, final); err != nil {
		return nil, err
	}
	if err := os.Rename(tarTmp, tarPath); err != nil {
		os.RemoveAll(final)
		return nil, fmt.Errorf("moving bundle tar into place: %w", err)
	}
	res = &SealResult{
		Name: name, Dir: final, Tar: tarPath, TarDigest: tarDigest,
		ManifestDigest: mdg, Manifest: m, Signature: sig, Source: m.Source, Files: len(m.Files),
	}
	for _, f := range m.Files {
		res.Bytes += f.Size
	}
	return res, nil
}

func sealedVersion(src *Source) string {
	v := version.Base + "+"
	if src.Commit != "" {
		v += "g" + src.Commit[:12]
	} else {
		v += "unknown"
	}
	if src.Dirty {
		v += ".dirty"
	}
	return v
}

func copyCells(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("reading cell bodies: %w", err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sh") {
			continue // the cells' Go code lives beside the bodies
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("cell bodies: %s is not a regular file: %s holds only cell files", filepath.Join(from, e.Name()), from)
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return fmt.Errorf("reading cell body: %w", err)
		}
		if err := manifests.ValidateBundlePath(CellsDir + "/" + e.Name()); err != nil {
			return fmt.Errorf("cell bodies: %w", err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no cell bodies in %s", from)
	}
	return nil
}

// copySuites seals every suite: each directory under from that holds a
// suite.json (the built-in ones), then each of userDirs, each checked as
// manifests.LoadSuite checks it and written to to/NAME/: exactly the
// files its suite.json names. Two suites of one name are refused.
func copySuites(from string, userDirs []string, to string) error {
	var dirs []string
	ents, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("reading the built-in suites: %w", err)
	}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(from, e.Name(), manifests.SuiteFile)); e.IsDir() && err == nil {
			dirs = append(dirs, filepath.Join(from, e.Name()))
		}
	}
	dirs = append(dirs, userDirs...)
	seen := map[string]string{}
	for _, dir := range dirs {
		s, files, err := manifests.LoadSuite(os.DirFS(dir))
		if err != nil {
			return fmt.Errorf("suite %s: %w", dir, err)
		}
		if other, dup := seen[s.Name]; dup {
			return fmt.Errorf("suites %s and %s are both named %q", other, dir, s.Name)
		}
		seen[s.Name] = dir
		out := filepath.Join(to, s.Name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		for name, b := range files {
			if err := manifests.ValidateBundlePath(manifests.SuitesDir + "/" + s.Name + "/" + name); err != nil {
				return fmt.Errorf("suite %s: %w", dir, err)
			}
			if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// setTimes sets every mtime under dir, dir included, to t; directories
// after their contents.
func setTimes(dir string, t time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	for _, p := range paths {
		if err := os.Chtimes(p, t, t); err != nil {
			return err
		}
	}
	return nil
}

// replaceDir moves the staged bundle into place, replacing one of the same
// name (the same name means the same manifest).
func replaceDir(staged, final string) error {
	if _, err := os.Lstat(final); err == nil {
		old := staged + ".old"
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("replacing %s: %w", final, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(staged, final); err != nil {
		return fmt.Errorf("moving bundle into place: %w", err)
	}
	return atomicfile.SyncDir(filepath.Dir(final))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// mkdirAll is os.MkdirAll that returns the topmost directory it created
// ("" when dir was there), so that a failure can take them away again.
func mkdirAll(dir string) (made string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = d
		if d == filepath.Dir(d) {
			break
		}
	}
	return made, os.MkdirAll(abs, 0o755)
}

// removeEmpty removes dir and its parents up to top, as long as they are
// empty (os.Remove refuses the others).
func removeEmpty(top, dir string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	for d := abs; ; d = filepath.Dir(d) {
		if os.Remove(d) != nil || d == top || d == filepath.Dir(d) {
			return
		}
	}
}
