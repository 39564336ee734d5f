//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// inRoot resolves inside the Sandbox's root: symlinks in the image are
// followed as the Sandbox would see them, never out of it, and never
// through /proc magic links.
const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// clone is a detached copy of a host mount, made before pivot_root while
// the host's paths are still visible, attached after it.
type clone struct {
	fd     int
	target string
	isDir  bool
}

// setupRoot builds the Sandbox's filesystem. It runs in the init, in the
// new mount namespace, before anything of the image runs.
func setupRoot(s *Spec) (err error) {
	// Nothing mounted here may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mount namespace private: %w", err)
	}
	var clones []clone
	defer func() {
		for _, c := range clones {
			unix.Close(c.fd)
		}
	}()
	mounts := append([]Mount(nil), s.Mounts...)
	sort.SliceStable(mounts, func(i, j int) bool { return depth(mounts[i].Target) < depth(mounts[j].Target) })
	for _, d := range s.Devices {
		fd, err := unix.OpenTree(unix.AT_FDCWD, d.Host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("cloning device %q: %w", d.Host, err)
		}
		clones = append(clones, clone{fd: fd, target: d.Container})
	}
	binds := map[int]int{} // index in mounts -> index in clones
	for i, m := range mounts {
		if m.Type != "bind" {
			continue
		}
		flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
		if m.Recursive {
			flags |= unix.AT_RECURSIVE
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, flags)
		if err != nil {
			return fmt.Errorf("cloning bind source %q: %w", m.Source, err)
		}
		if m.ReadOnly {
			attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
				unix.Close(fd)
				return fmt.Errorf("making bind of %q read-only: %w", m.Source, err)
			}
		}
		var st unix.Stat_t
		isDir := unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
		binds[i] = len(clones)
		clones = append(clones, clone{fd: fd, target: m.Target, isDir: isDir})
	}

	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(s.LowerDirs, ":"), s.UpperDir, s.WorkDir)
	if err := unix.Mount("overlay", s.RootfsDir, "overlay", unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting the overlay root at %q: %w", s.RootfsDir, err)
	}
	if err := unix.Chdir(s.RootfsDir); err != nil {
		return fmt.Errorf("entering the root: %w", err)
	}
	// pivot_root(".", ".") stacks the old root under the new one; the
	// detached unmount then drops every host mount from this namespace.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into %q: %w", s.RootfsDir, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the new root: %w", err)
	}
	defer unix.Close(root)

	const nsd = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC
	if err := mountFS(root, "proc", "/proc", nsd, nil); err != nil {
		return err
	}
	if err := mountFS(root, "tmpfs", "/dev", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, [][2]string{{"mode", "755"}, {"size", "65536k"}}); err != nil {
		return err
	}
	if err := populateDev(root); err != nil {
		return err
	}
	if err := mountFS(root, "devpts", "/dev/pts", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, [][2]string{{"ptmxmode", "0666"}, {"mode", "0620"}}); err != nil {
		return err
	}
	if err := mountFS(root, "tmpfs", "/dev/shm", nsd, [][2]string{{"mode", "1777"}, {"size", "65536k"}}); err != nil {
		return err
	}
	if err := mountFS(root, "sysfs", "/sys", nsd|unix.MOUNT_ATTR_RDONLY, nil); err != nil {
		return err
	}
	if err := maskProc(root); err != nil {
		return err
	}
	for _, c := range clones[:len(s.Devices)] {
		if err := attach(root, c); err != nil {
			return err
		}
	}
	for i, m := range mounts {
		if m.Type == "bind" {
			if err := attach(root, clones[binds[i]]); err != nil {
				return err
			}
			continue
		}
		attrs := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if m.ReadOnly {
			attrs |= unix.MOUNT_ATTR_RDONLY
		}
		var o [][2]string
		if m.Size != "" {
			o = append(o, [2]string{"size", m.Size})
		}
		if m.Mode != "" {
			o = append(o, [2]string{"mode", m.Mode})
		}
		if err := mountFS(root, "tmpfs", m.Target, attrs, o); err != nil {
			return err
		}
	}
	if s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			return fmt.Errorf("setting hostname %q: %w", s.Hostname, err)
		}
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if cwd := s.Process.Cwd; cwd != "" && cwd != "/" {
		fd, err := openTarget(root, cwd, true)
		if err != nil {
			return fmt.Errorf("creating working directory %q: %w", cwd, err)
		}
		unix.Close(fd)
	}
	if s.ReadonlyRootfs {
		if err := unix.MountSetattr(root, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("making the root read-only: %w", err)
		}
	}
	return nil
}

func depth(p string) int { return strings.Count(path.Clean(p), "/") }

// openTarget opens (creating it, and missing parents, when absent) a mount
// target inside the root, as an O_PATH descriptor.
func openTarget(root int, p string, dir bool) (int, error) {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return unix.Dup(root)
	}
	how := func(flags uint64) *unix.OpenHow {
		return &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: inRoot}
	}
	comps := strings.Split(p, "/")
	for i := range comps {
		prefix := strings.Join(comps[:i+1], "/")
		last := i == len(comps)-1
		fd, err := unix.Openat2(root, prefix, how(unix.O_PATH))
		if err == nil {
			if !last {
				unix.Close(fd)
				continue
			}
			return fd, nil
		}
		if err != unix.ENOENT {
			return -1, fmt.Errorf("opening %q: %w", "/"+prefix, err)
		}
		parent, err := unix.Openat2(root, orDot(strings.Join(comps[:i], "/")), how(unix.O_PATH|unix.O_DIRECTORY))
		if err != nil {
			return -1, fmt.Errorf("opening the parent of %q: %w", "/"+prefix, err)
		}
		if !last || dir {
			err = unix.Mkdirat(parent, comps[i], 0o755)
		} else {
			var f int
			f, err = unix.Openat(parent, comps[i], unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(f)
			}
		}
		unix.Close(parent)
		if err != nil && err != unix.EEXIST {
			return -1, fmt.Errorf("creating %q: %w", "/"+prefix, err)
		}
		if last {
			fd, err := unix.Openat2(root, prefix, how(unix.O_PATH))
			if err != nil {
				return -1, fmt.Errorf("opening %q: %w", "/"+prefix, err)
			}
			return fd, nil
		}
	}
	return -1, fmt.Errorf("opening %q: unreachable", p)
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// mountFS mounts a fresh filesystem at target with the new mount API, so
// the target is the descriptor openTarget resolved, not a path the kernel
// resolves again.
func mountFS(root int, fstype, target string, attrs uint64, opts [][2]string) error {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen %s for %q: %w", fstype, target, err)
	}
	defer unix.Close(fsfd)
	for _, o := range opts {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return fmt.Errorf("%s option %s=%s for %q: %w", fstype, o[0], o[1], target, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("creating %s for %q: %w", fstype, target, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, int(attrs))
	if err != nil {
		return fmt.Errorf("fsmount %s for %q: %w", fstype, target, err)
	}
	defer unix.Close(mfd)
	return attach(root, clone{fd: mfd, target: target, isDir: true})
}

// attach moves a detached mount onto its target inside the root.
func attach(root int, c clone) error {
	isDir := c.isDir
	if !isDir {
		var st unix.Stat_t
		isDir = unix.Fstat(c.fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	tfd, err := openTarget(root, c.target, isDir)
	if err != nil {
		return fmt.Errorf("mount target %q: %w", c.target, err)
	}
	defer unix.Close(tfd)
	if err := unix.MoveMount(c.fd, "", tfd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting at %q: %w", c.target, err)
	}
	return nil
}

// populateDev makes the minimal /dev: the usual character devices, the
// standard symlinks and mount points.
func populateDev(root int) error {
	dev, err := unix.Openat2(root, "dev", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: inRoot})
	if err != nil {
		return fmt.Errorf("opening /dev: %w", err)
	}
	defer unix.Close(dev)
	for _, n := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		if err := unix.Mknodat(dev, n.name, unix.S_IFCHR|0o666, int(unix.Mkdev(n.major, n.minor))); err != nil {
			return fmt.Errorf("creating /dev/%s: %w", n.name, err)
		}
		// mknod applies the umask; the nodes are meant for everyone.
		if err := unix.Fchmodat(dev, n.name, 0o666, 0); err != nil {
			return fmt.Errorf("setting the mode of /dev/%s: %w", n.name, err)
		}
	}
	for _, l := range [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {"pts/ptmx", "ptmx"}} {
		if err := unix.Symlinkat(l[0], dev, l[1]); err != nil {
			return fmt.Errorf("creating /dev/%s: %w", l[1], err)
		}
	}
	return nil
}

// maskProc hides the /proc files Docker hides and makes the kernel's
// tunables read-only: uid 0 without capabilities can still write most of
// /proc/sys, and some of it (core_pattern) runs programs on the host.
func maskProc(root int) error {
	for _, p := range []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"} {
		fd, err := unix.OpenTree(root, strings.TrimPrefix(p, "/"), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return fmt.Errorf("cloning %q: %w", p, err)
		}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		if err == nil {
			err = attach(root, clone{fd: fd, target: p})
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("making %q read-only: %w", p, err)
		}
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/kallsyms", "/proc/kmsg"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		// Each mask needs its own clone (a detached mount attaches once),
		// made from the path: older kernels (Debian 12's 6.1) refuse, with
		// EINVAL, to clone a mount that is itself a detached clone.
		fd, err := unix.OpenTree(root, "dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("cloning /dev/null for %q: %w", p, err)
		}
		err = attach(root, clone{fd: fd, target: p})
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("masking %q: %w", p, err)
		}
	}
	for _, p := range []string{"/proc/acpi", "/proc/scsi", "/sys/firmware"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := mountFS(root, "tmpfs", p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, [][2]string{{"size", "0"}}); err != nil {
			return fmt.Errorf("masking %q: %w", p, err)
		}
	}
	return nil
}

// loopbackUp brings up lo, the only interface a Sandbox has.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening a socket to configure lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}
