// Package atomicfile writes files that a crash never leaves half-written:
// the data goes to a temporary file in the same directory, which is synced,
// then renamed over the target, and the directory is synced. It never
// replaces what is not a regular file: a directory, a symlink, a fifo, a
// device or a socket at the path is left as it was, and the write refused
// (ErrNotRegular). WriteOutput is for a path a user named: it follows a
// symlink, and streams into a fifo or a character device.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sealbench/sealbench/manifests"
)

// ErrNotRegular says the path names something other than a regular file,
// which a write never replaces.
var ErrNotRegular = errors.New("not a regular file")

// WriteFile atomically replaces path with data, with the given
// permissions. What is at path must be a regular file, or nothing.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := replaceable(path); err != nil {
		return err
	}
	return write(path, data, perm, true)
}

// Create writes path atomically, failing with an error that wraps
// fs.ErrExist if it exists already.
func Create(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

// WriteOutput writes data to the output a user named, destroying nothing
// that is not a regular file:
//
//   - nothing there: the file is created atomically (as WriteFile);
//   - a regular file: it is replaced atomically;
//   - a fifo or a character device (/dev/null, a terminal, /dev/stdout):
//     data is written into it as a stream, and it stays what it was; a
//     fifo waits for its reader, as a shell's redirection does;
//   - a symlink: it is followed, and what it names is written as above,
//     the link itself kept; a link that names nothing is refused;
//   - a directory, a block device or a socket: refused.
//
// Every refusal wraps ErrNotRegular. CheckOutput says the same before
// anything is written.
func WriteOutput(path string, data []byte, perm os.FileMode) error {
	target, stream, err := resolveOutput(path)
	if err != nil {
		return err
	}
	if !stream {
		return write(target, data, perm, true)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// CheckOutput reports whether WriteOutput would write to path, without
// writing: nil, or the error it would refuse with.
func CheckOutput(path string) error {
	_, _, err := resolveOutput(path)
	return err
}

// resolveOutput says where WriteOutput writes path: a regular file to
// replace (or create) at target, or a stream to open at path.
func resolveOutput(path string) (target string, stream bool, err error) {
	lfi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	fi := lfi
	if lfi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = os.Stat(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				l, _ := os.Readlink(path)
				return "", false, fmt.Errorf("%s is a symlink to %s, which does not exist: %w", path, l, ErrNotRegular)
			}
			return "", false, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return "", false, fmt.Errorf("writing %s: following its symlink: %w", path, err)
		}
		return target, false, nil
	case m&fs.ModeNamedPipe != 0, m&fs.ModeCharDevice != 0:
		return path, true, nil
	default:
		return "", false, fmt.Errorf("%s is a %s, which is never written over: %w", path, typeName(m), ErrNotRegular)
	}
}

// replaceable is nil when path names a regular file (not through a
// symlink) or nothing.
func replaceable(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil // nothing there, or a file; other errors come with the write
	}
	return fmt.Errorf("writing %s: it is a %s, which is never replaced: %w", path, typeName(fi.Mode()), ErrNotRegular)
}

func typeName(m fs.FileMode) string { return manifests.FileTypeName(m) }

func write(path string, data []byte, perm os.FileMode, replace bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp, path)
	} else {
		// link(2) fails if path exists, so two writers cannot both win.
		err = os.Link(tmp, path)
		if err == nil {
			os.Remove(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so that renames and creations in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
