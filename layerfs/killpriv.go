//go:build linux

package layerfs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A Workspace mounts with FUSE_HANDLE_KILLPRIV_V2: the daemon, not the
// kernel, clears a file's set-ID bits and security.capability when the
// file is written, truncated or chowned. In exchange the kernel marks the
// mount SB_NOSEC, so after the first write to a file it stops asking for
// security.capability (one GETXATTR round trip) before every write; a
// 64 MiB dd made 64 of them.
//
// Passthrough writes never reach the daemon, so a file that has something
// to clear is never opened for writing with passthrough (privHandle): its
// writes come here, and each clears what Linux clears for that writer.
// What this cannot see: a file that gains a set-ID bit or a capability
// while a descriptor opened for writing before that stays open keeps them
// across that descriptor's later writes.

const xattrCaps = "security.capability"

// privileged reports whether writing to in may have to clear something.
func (in *inode) privileged() bool {
	if !in.isRegular() {
		return false
	}
	_, caps := in.xattrs[xattrCaps]
	return caps || in.mode&(syscall.S_ISUID|syscall.S_ISGID) != 0
}

// creds are what the kernel weighs when it clears privileges for a caller.
type creds struct {
	fsetid bool     // CAP_FSETID in the effective set
	fsgid  uint32   // the filesystem group id
	groups []uint32 // supplementary groups
}

func (c creds) inGroup(gid uint32) bool {
	if c.fsgid == gid {
		return true
	}
	for _, g := range c.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// callerCreds reads a caller's credentials from /proc. A caller that is
// gone, or whose status cannot be read, counts as unprivileged and in no
// group: then everything that can be cleared is.
func callerCreds(ctx context.Context) creds {
	fc, ok := ctx.(*fuse.Context)
	if !ok || fc.Pid == 0 {
		return creds{fsgid: ^uint32(0)}
	}
	c, err := readCreds(fmt.Sprintf("/proc/%d/status", fc.Pid))
	if err != nil {
		return creds{fsgid: ^uint32(0)}
	}
	return c
}

func readCreds(path string) (creds, error) {
	c := creds{fsgid: ^uint32(0)}
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		switch key {
		case "Gid": // real, effective, saved, filesystem
			if len(fields) == 4 {
				if g, err := strconv.ParseUint(fields[3], 10, 32); err == nil {
					c.fsgid = uint32(g)
				}
			}
		case "Groups":
			for _, s := range fields {
				if g, err := strconv.ParseUint(s, 10, 32); err == nil {
					c.groups = append(c.groups, uint32(g))
				}
			}
		case "CapEff":
			if len(fields) == 1 {
				if v, err := strconv.ParseUint(fields[0], 16, 64); err == nil {
					c.fsetid = v&(1<<unix.CAP_FSETID) != 0
				}
			}
		}
	}
	return c, sc.Err()
}

// dropSGID reports whether Linux clears in's set-group-ID bit for c: always
// when the file is group-executable, otherwise when c is neither in the
// file's group nor holds CAP_FSETID (setattr_should_drop_sgid).
func dropSGID(in *inode, c creds) bool {
	if in.mode&syscall.S_ISGID == 0 {
		return false
	}
	return in.mode&syscall.S_IXGRP != 0 || !(c.inGroup(in.gid) || c.fsetid)
}

// clearPrivs clears bits of in's mode and, when caps, its
// security.capability; ws.mu is held.
func (ws *Workspace) clearPrivs(in *inode, bits uint32, caps bool) syscall.Errno {
	if caps {
		if _, ok := in.xattrs[xattrCaps]; ok {
			delete(in.xattrs, xattrCaps)
			ws.changed(in)
		}
	}
	if in.mode&bits == 0 {
		return 0
	}
	in.mode &^= bits
	in.ctime = nowNs()
	if in.upper {
		if err := unix.Chmod(ws.upperPath(in), in.mode&07777); err != nil {
			return ws.errno(err)
		}
	}
	return 0
}

// privsOnWrite clears what a write (or fallocate) by the caller clears:
// security.capability always; set-user-ID and set-group-ID (see dropSGID)
// unless the caller holds CAP_FSETID. ws.mu is held.
func (ws *Workspace) privsOnWrite(ctx context.Context, in *inode) syscall.Errno {
	if !in.privileged() {
		return 0
	}
	var bits uint32
	if in.mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		if c := callerCreds(ctx); !c.fsetid {
			bits = syscall.S_ISUID
			if dropSGID(in, c) {
				bits |= syscall.S_ISGID
			}
		}
	}
	return ws.clearPrivs(in, bits, true)
}

// privsOnSetattr clears what a truncate or a chown clears. For a truncate
// (of a regular file) the kernel has already weighed CAP_FSETID and says
// so with FATTR_KILL_SUIDGID. A chown clears from every file but a
// directory, whoever does it: set-user-ID always, set-group-ID as
// dropSGID says, and security.capability (chown_common asks for
// ATTR_KILL_SUID, ATTR_KILL_PRIV and setattr_should_drop_sgid for every
// non-directory). A SETATTR that sets nothing is a chown to -1, -1, or
// the kernel clearing privileges before a write by a caller without
// CAP_FSETID (file_remove_privs): both clear what a chown clears.
// ws.mu is held.
func (ws *Workspace) privsOnSetattr(ctx context.Context, in *inode, sa *fuse.SetAttrIn) syscall.Errno {
	_, size := sa.GetSize()
	_, uid := sa.GetUID()
	_, gid := sa.GetGID()
	none := sa.Valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) == 0
	chown := (uid || gid || none) && !in.isDir()
	if !chown && !(size && in.privileged()) {
		return 0
	}
	var bits uint32
	if chown || sa.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		bits = syscall.S_ISUID
		if in.mode&syscall.S_ISGID != 0 && dropSGID(in, callerCreds(ctx)) {
			bits |= syscall.S_ISGID
		}
	}
	return ws.clearPrivs(in, bits, true)
}

// fileHandle returns h as the kernel should see it: with passthrough,
// unless it is open for writing on a file whose writes must clear
// privileges. ws.mu is held.
func (ws *Workspace) fileHandle(h *handle, write bool) fs.FileHandle {
	if write && h.in.privileged() {
		return &privHandle{privFile: h, h: h}
	}
	return h
}

// privFile is what a handle offers but passthrough.
type privFile interface {
	fs.FileReader
	fs.FileWriter
	fs.FileReleaser
	fs.FileFlusher
	fs.FileFsyncer
	fs.FileLseeker
	fs.FileAllocater
	fs.FileGetlker
	fs.FileSetlker
	fs.FileSetlkwer
	fs.FileIoctler
}

// privHandle is a handle without passthrough, open for writing on a
// privileged file: each write and fallocate clears what Linux clears.
type privHandle struct {
	privFile
	h *handle
}

func (p *privHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if e := p.clearForWrite(ctx); e != 0 {
		return 0, e
	}
	return p.privFile.Write(ctx, data, off)
}

func (p *privHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if e := p.clearForWrite(ctx); e != 0 {
		return e
	}
	return p.privFile.Allocate(ctx, off, size, mode)
}

func (p *privHandle) clearForWrite(ctx context.Context) syscall.Errno {
	ws := p.h.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.privsOnWrite(ctx, p.h.in)
}
