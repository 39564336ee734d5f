package cliutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// Outputs are the files and directories a command made, which, when it
// runs as root under sudo, it gives to the user who ran sudo: `sudo
// sealbench seal` must not leave out/ owned by root.
type Outputs struct{ paths []string }

// Made records paths the command made (a directory with all that is
// under it).
func (o *Outputs) Made(paths ...string) { o.paths = append(o.paths, paths...) }

// Makes records, before the command makes path (a file or a
// directory), the topmost of it and its parents that does not exist yet:
// that, and all under it, will be the command's. Nothing when path exists
// already: what was there before stays whose it was.
func (o *Outputs) Makes(path string) {
	top := ""
	for d := filepath.Clean(path); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		top = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if top != "" {
		o.Made(top)
	}
}

// GiveToSudoUser gives everything recorded to $SUDO_UID:$SUDO_GID when
// the process runs as root under sudo; otherwise it does nothing. Only
// directories, regular files and symbolic links change hands (never a
// device or a fifo an output was streamed into); a path that is gone is
// passed over.
func (o *Outputs) GiveToSudoUser() error {
	if os.Geteuid() != 0 || len(o.paths) == 0 {
		return nil
	}
	uid, gid, ok := sudoUser()
	if !ok {
		return nil
	}
	var errs []error
	for _, p := range o.paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if t := d.Type(); t.IsDir() || t.IsRegular() || t&fs.ModeSymlink != 0 {
				return os.Lchown(path, uid, gid)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("giving %s to the sudo user (uid %d): %w", p, uid, err))
		}
	}
	return errors.Join(errs...)
}

// sudoUser is the user sudo ran us for: $SUDO_UID and $SUDO_GID (the
// uid's own group when unset); not ok outside sudo or for root itself.
func sudoUser() (uid, gid int, ok bool) {
	uid, err := strconv.Atoi(os.Getenv("SUDO_UID"))
	if err != nil || uid == 0 {
		return 0, 0, false
	}
	gid = uid
	if g, err := strconv.Atoi(os.Getenv("SUDO_GID")); err == nil {
		gid = g
	}
	return uid, gid, true
}
