// Package scratch gives a long job (seal, the Sandbox image) a staging
// directory that a later job recognises and, once the job that made it
// is gone, removes: <parent>/.sealbench-<job>-<random>, beside the lock
// file <dir>.lock, which the job holds (flock) for as long as it lives.
// The kernel lets go of a flock when its process dies, however it dies,
// so a lock that can be taken names a directory nobody is using, and
// Sweep removes it; a live job's directory is never touched.
//
// A job keeps every temporary file inside its directory (a tar being
// written, the go command's work directory), so that one name covers
// all it may leave behind.
package scratch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Prefix starts the name of every staging directory and its lock.
const Prefix = ".sealbench-"

const lockExt = ".lock"

// Dir is a staging directory this process holds.
type Dir struct {
	Path string
	lock *os.File
}

// Make creates a staging directory for job in parent (which must exist),
// with its lock held. Remove it when done.
func Make(parent, job string) (*Dir, error) {
	for range 10 {
		var b [6]byte
		rand.Read(b[:])
		dir := filepath.Join(parent, Prefix+job+"-"+hex.EncodeToString(b[:]))
		// The lock comes first, and is held before the directory exists:
		// Sweep takes a directory without a lock for debris.
		f, err := os.OpenFile(dir+lockExt, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating a staging directory in %s: %w", parent, err)
		}
		if !lockIfStill(f) {
			// A Sweep took the new lock for a dead job's and removed it.
			f.Close()
			continue
		}
		fmt.Fprintf(f, "%d\n", os.Getpid()) // for a person looking, never trusted
		if err := os.Mkdir(dir, 0o700); err != nil {
			os.Remove(f.Name())
			f.Close()
			return nil, fmt.Errorf("creating a staging directory in %s: %w", parent, err)
		}
		return &Dir{Path: dir, lock: f}, nil
	}
	return nil, fmt.Errorf("creating a staging directory in %s: no free name", parent)
}

// Remove removes the directory and everything in it, then the lock.
func (d *Dir) Remove() error {
	if d.lock == nil {
		return nil
	}
	err := os.RemoveAll(d.Path)
	if err == nil {
		err = os.Remove(d.lock.Name())
	}
	d.lock.Close()
	d.lock = nil
	if err != nil {
		return fmt.Errorf("removing staging directory: %w", err)
	}
	return nil
}

// lockIfStill takes f's lock without waiting, and reports whether it did
// while f is still the file at its path (a Sweep may have removed it
// between its creation and the lock).
func lockIfStill(f *os.File) bool {
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	held, err1 := f.Stat()
	there, err2 := os.Lstat(f.Name())
	return err1 == nil && err2 == nil && os.SameFile(held, there)
}

// Sweep removes, from parent, the staging directories and locks of jobs
// that are gone, and returns their paths. A live job's are left alone.
// Every one is tried; the errors are joined.
func Sweep(parent string) (removed []string, err error) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("looking for stale staging directories in %s: %w", parent, err)
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, Prefix) {
			continue
		}
		p := filepath.Join(parent, name)
		dir, isLock := strings.CutSuffix(p, lockExt)
		switch {
		case isLock:
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
				continue
			}
			if lockIfStill(f) {
				// Its job is gone: the directory first, the lock last,
				// so that a directory is never seen without its lock by a
				// Sweep that could then take it for debris.
				if err := os.RemoveAll(dir); err != nil {
					errs = append(errs, err)
				} else if err := os.Remove(p); err != nil {
					errs = append(errs, err)
				} else {
					removed = append(removed, dir)
				}
			}
			f.Close()
		case e.IsDir():
			// A directory whose lock is gone: a Sweep stopped half-way.
			if _, err := os.Lstat(p + lockExt); errors.Is(err, os.ErrNotExist) {
				if err := os.RemoveAll(p); err != nil {
					errs = append(errs, err)
				} else {
					removed = append(removed, p)
				}
			}
		}
	}
	return removed, errors.Join(errs...)
}
