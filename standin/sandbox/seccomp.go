//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter refuses, with EPERM, the system calls that make or
// enter namespaces or change mounts, and a few kernel interfaces a
// benchmark body has no use for. Capabilities already stop most of these;
// the filter also stops what needs none, above all unshare(CLONE_NEWUSER),
// which would hand an unprivileged process a full capability set in a new
// user namespace. clone3 answers ENOSYS so that libc falls back to clone,
// whose flags the filter can read.
var blockedSyscalls = []uintptr{
	unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT,
	unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_KEXEC_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
}

// Namespace flags refused in clone's first argument.
const cloneNSFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

func auditArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// seccompProgram assembles the classic BPF filter.
func seccompProgram() ([]unix.SockFilter, error) {
	arch, ok := auditArch()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
		offNr  = 0
		offArc = 4
		offArg = 16 // args[0], low 32 bits (little-endian)
	)
	// The three returns sit at the end; jumps to them are counted from
	// each instruction's successor, so they are patched in after.
	type ins struct {
		f      unix.SockFilter
		jt, jf string // "", "allow", "eperm", "enosys", "kill"
	}
	var p []ins
	add := func(code uint16, k uint32, jt, jf string) {
		p = append(p, ins{f: unix.SockFilter{Code: code, K: k}, jt: jt, jf: jf})
	}
	add(ldAbs, offArc, "", "")
	add(jeq, arch, "", "kill")
	add(ldAbs, offNr, "", "")
	if runtime.GOARCH == "amd64" {
		add(jge, 0x40000000, "eperm", "") // the x32 ABI: a second set of numbers
	}
	for _, nr := range blockedSyscalls {
		add(jeq, uint32(nr), "eperm", "")
	}
	add(jeq, unix.SYS_CLONE3, "enosys", "")
	add(jeq, unix.SYS_CLONE, "", "allow")
	add(ldAbs, offArg, "", "")
	add(jset, cloneNSFlags, "eperm", "allow")
	labels := map[string]int{"allow": len(p), "eperm": len(p) + 1, "enosys": len(p) + 2, "kill": len(p) + 3}
	out := make([]unix.SockFilter, 0, len(p)+4)
	for i, in := range p {
		f := in.f
		for _, j := range []struct {
			l string
			d *uint8
		}{{in.jt, &f.Jt}, {in.jf, &f.Jf}} {
			if j.l == "" {
				continue
			}
			off := labels[j.l] - (i + 1)
			if off > 255 {
				return nil, fmt.Errorf("seccomp jump too long")
			}
			*j.d = uint8(off)
		}
		out = append(out, f)
	}
	out = append(out,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
	)
	return out, nil
}

var filterProg, filterErr = seccompProgram()

// installSeccomp installs the filter on the calling thread only (no TSYNC):
// the caller's thread is about to fork the process it is for.
func installSeccomp() error {
	if filterErr != nil {
		return filterErr
	}
	prog := unix.SockFprog{Len: uint16(len(filterProg)), Filter: &filterProg[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("installing the seccomp filter: %w", err)
	}
	return nil
}
