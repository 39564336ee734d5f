package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/internal/toolexec"
)

// Module is the module path every bundle is sealed from.
const Module = "github.com/sealbench/sealbench"

// SourceDateEpochEnv overrides the commit time as every mtime in a bundle.
const SourceDateEpochEnv = "SOURCE_DATE_EPOCH"

// Source is what Seal learned about the tree it seals.
type Source struct {
	Root   string    // the module root
	Commit string    // HEAD, or "" when the tree is not a git checkout
	Dirty  bool      // uncommitted changes, untracked files, or no git at all
	Time   time.Time // SOURCE_DATE_EPOCH, else the commit time, UTC
	// DirtyFiles lists up to a few changed paths, to say what is dirty.
	DirtyFiles []string
}

// ErrNotSource marks a directory that is not a sealbench source tree (no
// go.mod of the sealbench module, or no cell bodies).
var ErrNotSource = errors.New("not a sealbench source tree")

// FindModuleRoot walks up from dir to the directory whose go.mod declares
// the sealbench module.
func FindModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			if modulePath(b) == Module {
				return d, nil
			}
			return "", fmt.Errorf("%w: %s/go.mod is module %q, not %s", ErrNotSource, d, modulePath(b), Module)
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("%w: no go.mod found above %s", ErrNotSource, dir)
		}
	}
}

// SourceRoot is the source tree Seal would seal: dir itself when given
// (its go.mod must declare the sealbench module, and it must hold the cell
// bodies), or else the tree around the working directory. It reads and
// builds nothing, so commands call it to refuse a wrong tree up front.
func SourceRoot(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		return FindModuleRoot(wd)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return "", fmt.Errorf("%w: %s has no go.mod", ErrNotSource, dir)
	case err != nil:
		return "", fmt.Errorf("%w: %v", ErrNotSource, err)
	case modulePath(b) != Module:
		return "", fmt.Errorf("%w: %s/go.mod is module %q, not %s", ErrNotSource, dir, modulePath(b), Module)
	}
	if fi, err := os.Stat(filepath.Join(abs, CellsSourceDir)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no %s/ with the cell bodies", ErrNotSource, dir, CellsSourceDir)
	}
	return abs, nil
}

func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// ReadSource identifies the source tree at root: its commit, whether it is
// dirty, and the time every file in the bundle will carry.
func ReadSource(ctx context.Context, root string) (*Source, error) {
	s := &Source{Root: root}
	head, err := git(ctx, root, "rev-parse", "--verify", "HEAD")
	switch {
	case err == nil:
		s.Commit = head
		status, err := git(ctx, root, "status", "--porcelain", "--untracked-files=normal", "--", ".")
		if err != nil {
			return nil, err
		}
		if status != "" {
			s.Dirty = true
			lines := strings.Split(status, "\n")
			if len(lines) > 5 {
				lines = append(lines[:5], fmt.Sprintf("... and %d more", len(lines)-5))
			}
			s.DirtyFiles = lines
		}
		ct, err := git(ctx, root, "log", "-1", "--format=%ct", "HEAD")
		if err != nil {
			return nil, err
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading commit time: %q is not a number", ct)
		}
		s.Time = time.Unix(sec, 0).UTC()
	case errors.Is(err, exec.ErrNotFound) || isNotARepo(err):
		s.Dirty = true
		s.DirtyFiles = []string{"(not a git checkout, or one with no commit: the source is unidentified)"}
	default:
		return nil, err
	}
	if v, ok := os.LookupEnv(SourceDateEpochEnv); ok {
		sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || sec < 0 {
			return nil, fmt.Errorf("%s=%q is not a non-negative number of seconds", SourceDateEpochEnv, v)
		}
		s.Time = time.Unix(sec, 0).UTC()
	}
	if s.Time.IsZero() {
		return nil, fmt.Errorf("%s is not a git checkout with a commit, so it has no commit time: commit, or set %s to seal it", root, SourceDateEpochEnv)
	}
	return s, nil
}

type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

func isNotARepo(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && (strings.Contains(ge.stderr, "not a git repository") || strings.Contains(ge.stderr, "Needed a single revision"))
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := toolexec.Command(ctx, "git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &gitError{args: args, stderr: strings.TrimSpace(stderr.String()), err: err}
	}
	return strings.TrimRight(stdout.String(), "\n"), nil
}
