package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/sealbench/sealbench/manifests"
)

// ErrSignature marks a bundle whose signature is missing or does not verify
// with the given key; ErrUnusable marks input that is not a bundle at all
// (unreadable, no manifest, a manifest that does not parse).
var (
	ErrSignature = errors.New("signature missing or untrusted")
	ErrUnusable  = errors.New("unusable input")
	// ErrNotPinned marks a validly signed bundle that is not the one the
	// caller pinned (an older one offered in its place, say).
	ErrNotPinned = errors.New("not the pinned bundle")
)

// TarError is a bundle tar that is not whole: compressed, cut short, or
// with data after its end. It wraps ErrUnusable and says what to do.
type TarError struct {
	Path    string
	Problem string
	Next    string
}

func (e *TarError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Problem) }
func (e *TarError) Unwrap() error { return ErrUnusable }

// Hint is the next step for the user.
func (e *TarError) Hint() string { return e.Next }

// SignatureVerifier checks a manifest.sig file's contents against the manifest.
type SignatureVerifier interface {
	VerifyManifest(manifest, sig []byte) error
}

// Problem is one way a bundle differs from its signed manifest.
type Problem struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"` // missing, extra, type, path, size, mode, digest, sums, name, duplicate
	Detail string `json:"detail"`
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s: %s", p.Path, p.Kind, p.Detail) }

// ContentError lists every way a bundle's contents differ from its
// correctly signed manifest.
type ContentError struct {
	Bundle   string
	Problems []Problem
}

func (e *ContentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bundle %s does not match its signed manifest (%d problem", e.Bundle, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// VerifyOptions configures Verify.
type VerifyOptions struct {
	// Verifier checks the signature. Nil fails verification with ErrSignature.
	Verifier SignatureVerifier
	// Workers hash files in parallel (directories only); 0 means the number of CPUs.
	Workers int
	// Expect, when set, pins the bundle: a validly signed bundle with
	// another name (build-linux-<hash>) is refused with ErrNotPinned.
	Expect string
}

// VerifyResult describes a verified bundle.
type VerifyResult struct {
	Name           string                    `json:"name"` // from the manifest's digest
	Path           string                    `json:"path"`
	ManifestDigest manifests.Digest          `json:"manifestDigest"`
	Manifest       *manifests.BundleManifest `json:"-"`
	// Signature is the manifest.sig that verified, as it was read.
	Signature []byte `json:"-"`
	Files     int    `json:"files"`
	Bytes     int64  `json:"bytes"`
}

const maxTarEntries = 1 << 20

func unusablef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnusable, fmt.Sprintf(format, args...))
}

// Verify checks the bundle at path, a bundle directory or its tar: the
// signature first, then every file. It returns a *ContentError listing
// every difference, or an error wrapping ErrSignature or ErrUnusable.
func Verify(ctx context.Context, p string, opts VerifyOptions) (*VerifyResult, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, unusablef("%v", err)
	}
	switch {
	case fi.IsDir():
		return VerifyDir(ctx, p, opts)
	case fi.Mode().IsRegular():
		return VerifyTar(ctx, p, opts)
	default:
		return nil, unusablef("%s is neither a bundle directory nor a bundle tar", p)
	}
}

// checkSignature verifies and parses the manifest; nothing in it is
// looked at before the signature has verified.
func checkSignature(opts VerifyOptions, mb, sig []byte, haveSig bool) (*manifests.BundleManifest, error) {
	if !haveSig {
		return nil, fmt.Errorf("%w: %s is missing: the bundle is unsigned", ErrSignature, manifests.SignatureFile)
	}
	if opts.Verifier == nil {
		return nil, fmt.Errorf("%w: no public key to check %s against", ErrSignature, manifests.SignatureFile)
	}
	if err := opts.Verifier.VerifyManifest(mb, sig); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSignature, manifests.SignatureFile, err)
	}
	m, err := manifests.ParseBundleManifest(mb)
	if err != nil {
		return nil, fmt.Errorf("%w: the manifest is signed but unusable: %v", ErrUnusable, err)
	}
	if got := manifests.BundleName(mb); opts.Expect != "" && got != opts.Expect {
		return nil, fmt.Errorf("%w: the signature is valid, but this is %s and %s was pinned", ErrNotPinned, got, opts.Expect)
	}
	return m, nil
}

func nameProblem(base string, mb []byte) []Problem {
	want := manifests.BundleName(mb)
	if strings.HasPrefix(base, manifests.BundleNamePrefix) && base != want {
		return []Problem{{Path: base, Kind: "name", Detail: fmt.Sprintf("the bundle is named %s but its manifest is that of %s (files from two bundles mixed?)", base, want)}}
	}
	return nil
}

func finish(bundlePath string, m *manifests.BundleManifest, mb, sig []byte, problems []Problem) (*VerifyResult, error) {
	if len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
		return nil, &ContentError{Bundle: bundlePath, Problems: problems}
	}
	res := &VerifyResult{
		Name: manifests.BundleName(mb), Path: bundlePath, ManifestDigest: manifests.DigestOf(mb),
		Manifest: m, Signature: sig, Files: len(m.Files),
	}
	for _, f := range m.Files {
		res.Bytes += f.Size
	}
	return res, nil
}

// VerifyDir verifies a bundle directory.
func VerifyDir(ctx context.Context, dir string, opts VerifyOptions) (*VerifyResult, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, unusablef("opening bundle: %v", err)
	}
	defer root.Close()

	mb, err := readRootFile(root, manifests.ManifestFile, manifests.MaxManifestSize)
	if err != nil {
		return nil, unusablef("%s is not a bundle: %v", dir, err)
	}
	sig, err := readRootFile(root, manifests.SignatureFile, maxSignatureFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	m, err := checkSignature(opts, mb, sig, err == nil)
	if err != nil {
		return nil, err
	}

	problems := nameProblem(filepath.Base(filepath.Clean(dir)), mb)
	wantSums := m.SHA256SUMS()
	switch sums, err := readRootFile(root, manifests.SumsFile, int64(len(wantSums))); {
	case errors.Is(err, fs.ErrNotExist):
		problems = append(problems, Problem{Path: manifests.SumsFile, Kind: "missing", Detail: "not present"})
	case err != nil:
		problems = append(problems, Problem{Path: manifests.SumsFile, Kind: "sums", Detail: err.Error()})
	case !bytes.Equal(sums, wantSums):
		problems = append(problems, Problem{Path: manifests.SumsFile, Kind: "sums", Detail: "differs from the list the manifest gives"})
	}

	dirs := map[string]bool{}
	for _, d := range m.Dirs() {
		dirs[d] = true
	}
	seen := map[string]bool{}
	var walk func(rel string) error
	walk = func(rel string) error {
		f, err := root.Open(rel)
		if err != nil {
			return err
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := path.Join(rel, e.Name())
			if rel == "." {
				p = e.Name()
			}
			switch t := e.Type(); {
			case t.IsDir():
				if !dirs[p] {
					problems = append(problems, Problem{Path: p + "/", Kind: "extra", Detail: "directory not in the manifest"})
					continue
				}
				if err := walk(p); err != nil {
					return err
				}
			case t.IsRegular():
				if rel == "." && (p == manifests.ManifestFile || p == manifests.SignatureFile || p == manifests.SumsFile) {
					continue
				}
				if _, ok := m.File(p); !ok {
					problems = append(problems, Problem{Path: p, Kind: "extra", Detail: "file not in the manifest"})
					continue
				}
				seen[p] = true
			default:
				seen[p] = true // present, but wrong: not "missing" too
				problems = append(problems, Problem{Path: p, Kind: "type", Detail: fmt.Sprintf("is a %s; a bundle holds only regular files and directories", manifests.FileTypeName(t))})
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, unusablef("reading bundle directory: %v", err)
	}

	var todo []manifests.BundleFile
	for _, f := range m.Files {
		if !seen[f.Path] {
			problems = append(problems, Problem{Path: f.Path, Kind: "missing", Detail: "listed in the manifest, not present"})
			continue
		}
		if _, bad := findProblem(problems, f.Path); !bad {
			todo = append(todo, f)
		}
	}
	problems = append(problems, hashAll(ctx, root, todo, opts.Workers)...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return finish(dir, m, mb, sig, problems)
}

func findProblem(ps []Problem, p string) (Problem, bool) {
	for _, q := range ps {
		if q.Path == p {
			return q, true
		}
	}
	return Problem{}, false
}

// hashAll checks the files in parallel, the largest first.
func hashAll(ctx context.Context, root *os.Root, files []manifests.BundleFile, workers int) []Problem {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Size > files[j].Size })
	jobs := make(chan manifests.BundleFile)
	var (
		mu       sync.Mutex
		problems []Problem
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for f := range jobs {
				if p, bad := checkFile(root, f, buf); bad {
					mu.Lock()
					problems = append(problems, p)
					mu.Unlock()
				}
			}
		}()
	}
	for _, f := range files {
		if ctx.Err() != nil {
			break
		}
		jobs <- f
	}
	close(jobs)
	wg.Wait()
	return problems
}

// checkFile opens one file without following a symlink and without blocking
// on a FIFO, checks it is a regular file of the declared size and mode, and
// hashes at most the declared size (plus one byte, to see it is longer).
func checkFile(root *os.Root, f manifests.BundleFile, buf []byte) (Problem, bool) {
	fail := func(kind, format string, args ...any) (Problem, bool) {
		return Problem{Path: f.Path, Kind: kind, Detail: fmt.Sprintf(format, args...)}, true
	}
	fh, err := root.OpenFile(f.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fail("type", "cannot be opened as a regular file: %v", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return fail("type", "%v", err)
	}
	if !fi.Mode().IsRegular() {
		return fail("type", "is a %s; a bundle holds only regular files", manifests.FileTypeName(fi.Mode()))
	}
	if special := fi.Mode() & (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); special != 0 || manifests.FileMode(fi.Mode().Perm()) != f.Mode {
		return fail("mode", "mode %s, the manifest says %s", modeString(fi.Mode()), f.Mode)
	}
	if fi.Size() != f.Size {
		return fail("size", "%d bytes, the manifest says %d", fi.Size(), f.Size)
	}
	if _, err := io.CopyBuffer(io.Discard, manifests.NewVerifyingReader(fh, f.Size, f.Digest), buf); err != nil {
		return contentProblem(f.Path, err)
	}
	return Problem{}, false
}

func contentProblem(p string, err error) (Problem, bool) {
	var me *manifests.MismatchError
	if errors.As(err, &me) {
		return Problem{Path: p, Kind: me.Field, Detail: fmt.Sprintf("%s, the manifest says %s", me.Got, me.Want)}, true
	}
	return Problem{Path: p, Kind: "read", Detail: err.Error()}, true
}

func modeString(m fs.FileMode) string {
	s := fmt.Sprintf("%04o", uint32(m.Perm()))
	if m&fs.ModeSetuid != 0 {
		s += "+setuid"
	}
	if m&fs.ModeSetgid != 0 {
		s += "+setgid"
	}
	if m&fs.ModeSticky != 0 {
		s += "+sticky"
	}
	return s
}

const maxSignatureFile = 64 << 10

// readRootFile reads a small regular file of the bundle, refusing symlinks,
// special files, and anything larger than max.
func readRootFile(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink", name)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s, not a regular file", name, manifests.FileTypeName(fi.Mode()))
	}
	return readAtMost(f, name, max)
}

func readAtMost(r io.Reader, name string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	return b, nil
}

// VerifyTar verifies a bundle tar. It reads the tar twice: once for the
// manifest and its signature (skipping file data), and, once the signature
// has verified, once to check every entry.
func VerifyTar(ctx context.Context, tarPath string, opts VerifyOptions) (*VerifyResult, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return nil, unusablef("opening bundle tar: %v", err)
	}
	defer f.Close()

	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		return nil, &TarError{Path: tarPath, Problem: "the file is empty",
			Next: "copy the tar again from where it was sealed (or verify the bundle directory)"}
	}
	if err := checkNotCompressed(f, tarPath); err != nil {
		return nil, err
	}

	// Pass 1: the top directory, the manifest and the signature.
	var top string
	var mb, sig []byte
	var haveManifest, haveSig bool
	tr := tar.NewReader(f)
	for n := 0; ; n++ {
		h, err := nextEntry(tr, tarPath)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if n > maxTarEntries {
			return nil, unusablef("%s has more than %d entries", tarPath, maxTarEntries)
		}
		if n == 0 {
			top = strings.TrimSuffix(h.Name, "/")
			if h.Typeflag != tar.TypeDir || top == "" || strings.ContainsAny(top, "/\\\x00") || top == "." || top == ".." {
				return nil, unusablef("%s does not start with the bundle's top directory (first entry %q)", tarPath, h.Name)
			}
			continue
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		switch h.Name {
		case top + "/" + manifests.ManifestFile:
			if !haveManifest {
				if mb, err = readAtMost(tr, manifests.ManifestFile, manifests.MaxManifestSize); errors.Is(err, io.ErrUnexpectedEOF) {
					return nil, truncated(tarPath, "it ends inside "+manifests.ManifestFile)
				} else if err != nil {
					return nil, unusablef("%v", err)
				}
				haveManifest = true
			}
		case top + "/" + manifests.SignatureFile:
			if !haveSig {
				if sig, err = readAtMost(tr, manifests.SignatureFile, maxSignatureFile); errors.Is(err, io.ErrUnexpectedEOF) {
					return nil, truncated(tarPath, "it ends inside "+manifests.SignatureFile)
				} else if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrSignature, err)
				}
				haveSig = true
			}
		}
	}
	// Go's tar reader takes a file that stops between entries for a whole
	// one; a cut copy would then look unsigned, or verify with files
	// missing. And it stops at the end marker, so an archive appended
	// after it would go unseen by us but not by tar -x.
	if err := checkTarEnd(f, tarPath); err != nil {
		return nil, err
	}
	if !haveManifest {
		return nil, unusablef("%s is not a bundle: no %s/%s", tarPath, top, manifests.ManifestFile)
	}
	m, err := checkSignature(opts, mb, sig, haveSig)
	if err != nil {
		return nil, err
	}

	// Pass 2: every entry.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, unusablef("rereading %s: %v", tarPath, err)
	}
	problems := nameProblem(top, mb)
	dirs := map[string]bool{}
	for _, d := range m.Dirs() {
		dirs[d] = true
	}
	seen := map[string]bool{}
	wantSums := m.SHA256SUMS()
	buf := make([]byte, 1<<20)
	tr = tar.NewReader(f)
	for first := true; ; first = false {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := nextEntry(tr, tarPath)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if first {
			continue // the top directory, checked in pass 1
		}
		rel, ok := strings.CutPrefix(h.Name, top+"/")
		isDirName := strings.HasSuffix(rel, "/")
		rel = strings.TrimSuffix(rel, "/")
		if !ok {
			problems = append(problems, Problem{Path: h.Name, Kind: "path", Detail: "outside the bundle's top directory " + top})
			continue
		}
		meta := rel == manifests.ManifestFile || rel == manifests.SignatureFile || rel == manifests.SumsFile
		if !meta {
			if err := manifests.ValidateBundlePath(rel); err != nil {
				problems = append(problems, Problem{Path: h.Name, Kind: "path", Detail: err.Error()})
				continue
			}
		}
		if seen[rel] {
			problems = append(problems, Problem{Path: rel, Kind: "duplicate", Detail: "the tar holds this path more than once"})
			continue
		}
		seen[rel] = true
		switch h.Typeflag {
		case tar.TypeDir:
			if !dirs[rel] {
				problems = append(problems, Problem{Path: rel + "/", Kind: "extra", Detail: "directory not in the manifest"})
			}
		case tar.TypeReg:
			if isDirName {
				problems = append(problems, Problem{Path: h.Name, Kind: "path", Detail: "a file whose name ends in /"})
				continue
			}
			if rel == manifests.SumsFile {
				if sums, err := readAtMost(tr, rel, int64(len(wantSums))); err != nil || !bytes.Equal(sums, wantSums) {
					problems = append(problems, Problem{Path: rel, Kind: "sums", Detail: "differs from the list the manifest gives"})
				}
				continue
			}
			if meta {
				continue
			}
			bf, ok := m.File(rel)
			if !ok {
				problems = append(problems, Problem{Path: rel, Kind: "extra", Detail: "file not in the manifest"})
				continue
			}
			if manifests.FileMode(h.Mode) != bf.Mode {
				problems = append(problems, Problem{Path: rel, Kind: "mode", Detail: fmt.Sprintf("mode %04o, the manifest says %s", h.Mode, bf.Mode)})
				continue
			}
			if h.Size != bf.Size {
				problems = append(problems, Problem{Path: rel, Kind: "size", Detail: fmt.Sprintf("%d bytes, the manifest says %d", h.Size, bf.Size)})
				continue
			}
			if _, err := io.CopyBuffer(io.Discard, manifests.NewVerifyingReader(tr, bf.Size, bf.Digest), buf); err != nil {
				p, _ := contentProblem(rel, err)
				problems = append(problems, p)
			}
		default:
			problems = append(problems, Problem{Path: rel, Kind: "type", Detail: fmt.Sprintf("tar entry of type %q; a bundle holds only regular files and directories", h.Typeflag)})
		}
	}
	for _, bf := range m.Files {
		if !seen[bf.Path] {
			problems = append(problems, Problem{Path: bf.Path, Kind: "missing", Detail: "listed in the manifest, not present"})
		}
	}
	if !seen[manifests.SumsFile] {
		problems = append(problems, Problem{Path: manifests.SumsFile, Kind: "missing", Detail: "not present"})
	}
	return finish(tarPath, m, mb, sig, problems)
}

// compressions are the magic numbers of what a bundle tar may have been
// packed with, and the command that unpacks each.
var compressions = []struct {
	magic      string
	name, undo string
}{
	{"\x1f\x8b", "gzip", "gunzip"},
	{"\xfd7zXZ\x00", "xz", "unxz"},
	{"\x28\xb5\x2f\xfd", "zstd", "unzstd"},
	{"BZh", "bzip2", "bunzip2"},
}

// checkNotCompressed refuses a compressed tar by name: the bundle's
// signature covers the tar's contents, and verify reads it as it is.
func checkNotCompressed(f *os.File, tarPath string) error {
	head := make([]byte, 8)
	n, _ := f.ReadAt(head, 0)
	for _, c := range compressions {
		if bytes.HasPrefix(head[:n], []byte(c.magic)) {
			return &TarError{Path: tarPath, Problem: fmt.Sprintf("the tar is %s-compressed", c.name),
				Next: fmt.Sprintf("decompress it first: %s -k %s, and pass the .tar", c.undo, tarPath)}
		}
	}
	return nil
}

// nextEntry is tr.Next, its errors as verification reports them: io.EOF
// at the end, a tar cut inside an entry, one that cannot be read.
func nextEntry(tr *tar.Reader, tarPath string) (*tar.Header, error) {
	h, err := tr.Next()
	switch {
	case err == nil, err == io.EOF:
		return h, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, truncated(tarPath, "it ends inside an entry")
	default:
		return nil, unusablef("%s is not a readable tar: %v", tarPath, err)
	}
}

func truncated(tarPath, why string) error {
	return &TarError{Path: tarPath, Problem: "the tar is truncated: " + why,
		Next: "the copy was cut short: copy the tar again from where it was sealed (or verify the bundle directory)"}
}

// checkTarEnd is called when a tar reader reading f has returned io.EOF:
// the two zero blocks that end a tar must be what it read last, and only
// zeros (a tar's record padding) may follow them.
func checkTarEnd(f *os.File, tarPath string) error {
	pos, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return unusablef("reading %s: %v", tarPath, err)
	}
	const block = 512
	end := make([]byte, 2*block)
	if pos < int64(len(end)) {
		return truncated(tarPath, "it has no end-of-archive marker")
	}
	if _, err := f.ReadAt(end, pos-int64(len(end))); err != nil {
		return unusablef("reading %s: %v", tarPath, err)
	}
	if !allZero(end) {
		return truncated(tarPath, fmt.Sprintf("it stops after %d bytes, between two entries, with no end-of-archive marker", pos))
	}
	buf := make([]byte, 64<<10)
	for off := pos; ; {
		n, err := f.ReadAt(buf, off)
		if !allZero(buf[:n]) {
			fi, _ := f.Stat()
			extra := int64(0)
			if fi != nil {
				extra = fi.Size() - pos
			}
			return &TarError{Path: tarPath, Problem: fmt.Sprintf("%d bytes of data follow the end-of-archive marker (another archive appended?)", extra),
				Next: "a bundle tar ends at its end-of-archive marker: use the tar as seal wrote it (its digest is in seal's output)"}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return unusablef("reading %s: %v", tarPath, err)
		}
	}
	_, err = f.Seek(pos, io.SeekStart)
	return err
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
