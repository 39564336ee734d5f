//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Cap is a Linux capability number.
type Cap int

var capNames = map[string]Cap{
	"CHOWN": unix.CAP_CHOWN, "DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"FOWNER": unix.CAP_FOWNER, "FSETID": unix.CAP_FSETID, "KILL": unix.CAP_KILL, "SETGID": unix.CAP_SETGID,
	"SETUID": unix.CAP_SETUID, "SETPCAP": unix.CAP_SETPCAP, "LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE,
	"NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "NET_BROADCAST": unix.CAP_NET_BROADCAST,
	"NET_ADMIN": unix.CAP_NET_ADMIN, "NET_RAW": unix.CAP_NET_RAW, "IPC_LOCK": unix.CAP_IPC_LOCK,
	"IPC_OWNER": unix.CAP_IPC_OWNER, "SYS_MODULE": unix.CAP_SYS_MODULE, "SYS_RAWIO": unix.CAP_SYS_RAWIO,
	"SYS_CHROOT": unix.CAP_SYS_CHROOT, "SYS_PTRACE": unix.CAP_SYS_PTRACE, "SYS_PACCT": unix.CAP_SYS_PACCT,
	"SYS_ADMIN": unix.CAP_SYS_ADMIN, "SYS_BOOT": unix.CAP_SYS_BOOT, "SYS_NICE": unix.CAP_SYS_NICE,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "SYS_TIME": unix.CAP_SYS_TIME, "SYS_TTY_CONFIG": unix.CAP_SYS_TTY_CONFIG,
	"MKNOD": unix.CAP_MKNOD, "LEASE": unix.CAP_LEASE, "AUDIT_WRITE": unix.CAP_AUDIT_WRITE,
	"AUDIT_CONTROL": unix.CAP_AUDIT_CONTROL, "SETFCAP": unix.CAP_SETFCAP, "MAC_OVERRIDE": unix.CAP_MAC_OVERRIDE,
	"MAC_ADMIN": unix.CAP_MAC_ADMIN, "SYSLOG": unix.CAP_SYSLOG, "WAKE_ALARM": unix.CAP_WAKE_ALARM,
	"BLOCK_SUSPEND": unix.CAP_BLOCK_SUSPEND, "AUDIT_READ": unix.CAP_AUDIT_READ, "PERFMON": unix.CAP_PERFMON,
	"BPF": unix.CAP_BPF, "CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE,
}

// String is the capability's name, as Docker writes it ("CAP_SYS_ADMIN").
func (c Cap) String() string {
	for n, v := range capNames {
		if v == c {
			return "CAP_" + n
		}
	}
	return "CAP_" + strconv.Itoa(int(c))
}

// DefaultCaps is Docker's default capability set, less CAP_MKNOD: without
// a device cgroup, a node made inside the Sandbox would reach the host's
// devices. Ask for it with CapAdd if you must.
var DefaultCaps = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
	"SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}

// ParseCap reads "SYS_ADMIN", "CAP_SYS_ADMIN" or "cap_sys_admin".
func ParseCap(name string) (Cap, error) {
	n := strings.TrimPrefix(strings.ToUpper(name), "CAP_")
	c, ok := capNames[n]
	if !ok {
		return 0, fmt.Errorf("unknown capability %q", name)
	}
	return c, nil
}

// GrantedCaps works out a container's capabilities the way Docker does:
// the default set, plus add, less drop; "ALL" in either means every one.
// Privileged grants every capability.
func GrantedCaps(add, drop []string, privileged bool) ([]Cap, error) {
	set := map[Cap]bool{}
	if privileged {
		for _, c := range capNames {
			set[c] = true
		}
		return sortedCaps(set), nil
	}
	for _, n := range DefaultCaps {
		set[capNames[n]] = true
	}
	for _, n := range drop {
		if strings.EqualFold(n, "ALL") {
			clear(set)
			continue
		}
		c, err := ParseCap(n)
		if err != nil {
			return nil, fmt.Errorf("CapDrop: %w", err)
		}
		delete(set, c)
	}
	for _, n := range add {
		if strings.EqualFold(n, "ALL") {
			for _, c := range capNames {
				set[c] = true
			}
			continue
		}
		c, err := ParseCap(n)
		if err != nil {
			return nil, fmt.Errorf("CapAdd: %w", err)
		}
		set[c] = true
	}
	return sortedCaps(set), nil
}

func sortedCaps(set map[Cap]bool) []Cap {
	var out []Cap
	for c := Cap(0); c <= 63; c++ {
		if set[c] {
			out = append(out, c)
		}
	}
	return out
}

// lastCap is the highest capability this kernel knows.
func lastCap() Cap {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return Cap(n)
		}
	}
	return unix.CAP_LAST_CAP
}

// restrictThread limits the calling OS thread, which the caller has locked
// and will throw away, before it forks a process: the bounding set keeps
// only keep (so that execve, even as uid 0, grants nothing else), the
// ambient and inheritable sets are emptied, and optionally no_new_privs and
// the seccomp filter are set. Permitted and effective stay as they are so
// that the forked child can still change its user; execve then recomputes
// them from the bounding set.
func restrictThread(keep []Cap, last Cap, noNewPrivs, filter bool) error {
	if noNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("setting no_new_privs: %w", err)
		}
	}
	if filter {
		if err := installSeccomp(); err != nil {
			return err
		}
	}
	kept := map[Cap]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	for c := Cap(0); c <= last; c++ {
		if kept[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("dropping %v from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing inheritable capabilities: %w", err)
	}
	return nil
}
