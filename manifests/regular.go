package manifests

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is what OpenRegular answers for a path that names a
// directory, a fifo, a device or a socket: an input read as a file (a
// key, a plan, samples, a lock) must be a regular file.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens the regular file at path (a symlink is followed) for
// reading. Anything else is refused with an error wrapping ErrNotRegular,
// and is not read: a fifo with no writer would block the reader forever,
// and a device never ends. The type is checked before the open and again
// on what was opened, which is opened without blocking.
func OpenRegular(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(path, fi.Mode())
		}
		return nil, err
	}
	return f, nil
}

// ReadRegular reads the regular file at path (OpenRegular), refusing one
// larger than max bytes (max <= 0: no bound).
func ReadRegular(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if max <= 0 {
		return io.ReadAll(f)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

func notRegular(path string, m fs.FileMode) error {
	return fmt.Errorf("%s is a %s: %w", path, FileTypeName(m), ErrNotRegular)
}

// FileTypeName names the type of a file for a person: "directory",
// "named pipe (fifo)", "character device", and so on.
func FileTypeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "regular file"
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe (fifo)"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t.IsDir():
		return "directory"
	default:
		return "special file"
	}
}
