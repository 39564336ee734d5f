//go:build !sealbench_bundle

package cmd

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
)

// What a command writes must never be what it reads: these checks run
// before anything is read or written, and compare paths after resolving
// symlinks (and, for files that exist, by inode, so a hard link or another
// spelling of the same path is caught too).

// resolved is p made absolute, with the symlinks of its longest existing
// prefix resolved.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for d := abs; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return abs
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// sameFile reports whether a and b name the same file.
func sameFile(a, b string) bool {
	if resolved(a) == resolved(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	rp, rd := resolved(p), resolved(dir)
	return rp == rd || strings.HasPrefix(rp, rd+string(filepath.Separator))
}

// checkOutFile refuses an output file that atomicfile.WriteOutput would
// not write (a directory, a block device, a socket, a symlink that names
// nothing) or that is one of the inputs, however spelled.
func checkOutFile(flag, out, hint string, inputs ...string) error {
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return usageErrorf(hint, "%s %s is a directory; it takes a file", flag, out)
	}
	if err := atomicfile.CheckOutput(out); err != nil {
		return usageErrorf(hint, "%s: %v", flag, err)
	}
	for _, in := range inputs {
		if sameFile(out, in) {
			return usageErrorf(hint, "%s %s is %s, which this command reads: writing it would destroy its own input", flag, out, in)
		}
	}
	return nil
}

// checkOutDir refuses an output directory that is a file (or lies under
// one).
func checkOutDir(flag, out, hint string) error {
	for d := filepath.Clean(out); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil {
			switch {
			case fi.IsDir():
				return nil
			case d == filepath.Clean(out) && fi.Mode().IsRegular():
				return usageErrorf(hint, "%s %s is a file; it takes a directory", flag, out)
			case d == filepath.Clean(out):
				return usageErrorf(hint, "%s %s is a %s; it takes a directory", flag, out, manifests.FileTypeName(fi.Mode()))
			default:
				return usageErrorf(hint, "%s %s lies under %s, which is a file", flag, out, d)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// checkRunOut refuses a results directory that is a file, lies inside the
// bundle the run executes (the results would change it), or already holds
// a run's results: the runner appends to samples.jsonl and rewrites
// pins.json, which would mix two runs into one and lose the first's pins.
func checkRunOut(out, bundleDir string) error {
	const hint = "pass a new directory, or leave --out out for out/runs/<run id>"
	if err := checkOutDir("--out", out, hint); err != nil {
		return err
	}
	if bundleDir != "" && within(out, bundleDir) {
		return usageErrorf(hint, "--out %s is inside the bundle %s: the results would change the bundle", out, bundleDir)
	}
	for _, n := range []string{manifests.SamplesFile, manifests.PinsFile} {
		if _, err := os.Lstat(filepath.Join(out, n)); err == nil {
			return usageErrorf(hint, "--out %s already holds a run's results (%s): a run never writes over another's", out, n)
		}
	}
	return nil
}
