//go:build linux

package layerfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain also serves as the helper TestPrivilegesClearedLikeTheKernel
// runs as another user: with LAYERFS_PRIV_OP set, the binary does that one
// operation on LAYERFS_PRIV_PATH and exits.
func TestMain(m *testing.M) {
	if op := os.Getenv("LAYERFS_PRIV_OP"); op != "" {
		if err := privOp(op, os.Getenv("LAYERFS_PRIV_PATH")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(faultHelperEnv) != "" {
		if err := faultHelper(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(runTests(m))
}

func privOp(op, path string) error {
	switch op {
	case "write", "open":
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if op == "write" {
			if _, err := f.WriteAt([]byte("x"), 0); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	case "truncate":
		return os.Truncate(path, 1)
	case "otrunc":
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		return f.Close()
	case "fallocate":
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fallocate(int(f.Fd()), 0, 0, 8192)
	case "chown":
		return os.Chown(path, 1000, -1)
	case "chown-self": // by the owner, to itself: allowed without privilege
		return os.Lchown(path, os.Getuid(), -1)
	case "chown-none": // changes nothing, but still a chown
		return os.Lchown(path, -1, -1)
	case "chgrp-self":
		return os.Lchown(path, -1, os.Getgid())
	}
	return fmt.Errorf("unknown op %q", op)
}

// capability is a valid security.capability value (revision 2, effective,
// CAP_NET_RAW permitted).
func capability() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000001)
	binary.LittleEndian.PutUint32(b[4:], 1<<unix.CAP_NET_RAW)
	return b
}

// TestPrivilegesClearedLikeTheKernel writes, truncates, fallocates and
// chowns files with set-ID bits and a security.capability, as root and as
// an unprivileged user, on a plain directory and on a Workspace, and
// checks that the Workspace (whose daemon clears them itself, under
// FUSE_HANDLE_KILLPRIV_V2) ends with the same mode and capability as the
// kernel leaves on the plain directory.
func TestPrivilegesClearedLikeTheKernel(t *testing.T) {
	plain, ws, helper := privSetup(t)
	type scenario struct {
		mode   uint32
		caps   bool
		op     string
		nobody bool // as uid 65534 rather than as root
	}
	var cases []scenario
	for _, mode := range []uint32{0o6777, 0o4777, 0o2777, 0o2767, 0o0777} {
		for _, op := range []string{"write", "open", "truncate", "otrunc", "fallocate"} {
			for _, nobody := range []bool{true, false} {
				cases = append(cases, scenario{mode: mode, op: op, nobody: nobody})
			}
		}
		cases = append(cases, scenario{mode: mode, op: "chown"})
	}
	for _, op := range []string{"write", "open", "truncate", "chown"} {
		cases = append(cases, scenario{mode: 0o0777, caps: true, op: op})
		cases = append(cases, scenario{mode: 0o0777, caps: true, op: op, nobody: op != "chown"})
	}
	result := func(dir string, i int, sc scenario) string {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(p, []byte("data\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, os.FileMode(sc.mode&0o777)|modeBits(sc.mode)); err != nil {
			t.Fatal(err)
		}
		if sc.caps {
			if err := unix.Setxattr(p, xattrCaps, capability(), 0); err != nil {
				t.Fatalf("%s: setting %s: %v", p, xattrCaps, err)
			}
		}
		return runPrivOp(t, helper, sc.op, p, sc.nobody)
	}
	want := compareWithKernel(t, plain, ws.mountpoint, len(cases), func(i int) string {
		sc := cases[i]
		who := "root"
		if sc.nobody {
			who = "uid 65534"
		}
		return fmt.Sprintf("%s by %s of a %04o file (capability %v)", sc.op, who, sc.mode, sc.caps)
	}, func(dir string, i int) string { return result(dir, i, cases[i]) })
	cleared := 0
	for i, sc := range cases {
		if want[i] != fmt.Sprintf("mode %04o, capability %v", sc.mode, sc.caps) {
			cleared++
		}
	}
	// The cases must exercise the clearing, not only its absence.
	if cleared < 10 {
		t.Errorf("only %d of %d cases cleared anything on the plain directory", cleared, len(cases))
	}
	t.Logf("%d cases, %d of them clear something", len(cases), cleared)
}

// privSetup returns a plain directory and a Workspace that uid 65534 can
// reach, and a copy of the test binary that uid 65534 can run (see
// TestMain).
func privSetup(t *testing.T) (plain string, ws *Workspace, helper string) {
	t.Helper()
	needFUSE(t)
	plain = t.TempDir()
	ws = mountWS(t, newStore(t, ProfileDisposable), nil)
	if !ws.features.KillPrivV2 {
		t.Fatal("the kernel did not grant FUSE_HANDLE_KILLPRIV_V2")
	}
	for _, d := range []string{plain, filepath.Dir(plain), filepath.Dir(ws.mountpoint), filepath.Dir(filepath.Dir(ws.mountpoint))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	helper = filepath.Join(filepath.Dir(plain), "helper.test")
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(helper, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return plain, ws, helper
}

// asNobody runs privOp(op, path) as uid 65534, gid 65534, in no other
// group, without capabilities.
func asNobody(helper, op, path string) error {
	cmd := exec.Command(helper)
	cmd.Env = append(os.Environ(), "LAYERFS_PRIV_OP="+op, "LAYERFS_PRIV_PATH="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s as uid 65534 on %s: %v\n%s", op, path, err, out)
	}
	return nil
}

// runPrivOp does op on p as root, or as uid 65534 when nobody, and returns
// privState(p).
func runPrivOp(t *testing.T, helper, op, p string, nobody bool) string {
	t.Helper()
	if nobody {
		if err := asNobody(helper, op, p); err != nil {
			t.Fatal(err)
		}
	} else if err := privOp(op, p); err != nil {
		t.Fatalf("%s as root on %s: %v", op, p, err)
	}
	return privState(t, p)
}

// privState is what the comparison tests compare: a file's permission
// bits and whether it has a security.capability.
func privState(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	_, err := unix.Lgetxattr(p, xattrCaps, make([]byte, 64))
	hasCaps := err == nil
	if err != nil && !errors.Is(err, unix.ENODATA) {
		t.Fatalf("%s: reading %s: %v", p, xattrCaps, err)
	}
	return fmt.Sprintf("mode %04o, capability %v", st.Mode&0o7777, hasCaps)
}

// TestChownClearsLikeTheKernel chowns files of every type but directories
// (regular, FIFO, socket, character and block device) whose mode has
// set-ID bits, as root and as their unprivileged owner (to itself, which
// needs no privilege; in the file's group or not), on a plain directory
// and on a Workspace, and checks that the Workspace clears the same bits
// as the kernel: set-user-ID always, set-group-ID when the file is
// group-executable or the caller neither is in its group nor holds
// CAP_FSETID (chown_common, setattr_should_drop_sgid).
func TestChownClearsLikeTheKernel(t *testing.T) {
	plain, ws, helper := privSetup(t)
	types := map[string]uint32{"regular": unix.S_IFREG, "fifo": unix.S_IFIFO, "socket": unix.S_IFSOCK,
		"char device": unix.S_IFCHR, "block device": unix.S_IFBLK}
	type scenario struct {
		typ    string
		mode   uint32
		gid    int // the file's group before the chown
		op     string
		nobody bool
	}
	var cases []scenario
	for typ := range types {
		for _, mode := range []uint32{0o6777, 0o6755, 0o4755, 0o2777, 0o2767, 0o2745, 0o0777} {
			cases = append(cases, scenario{typ: typ, mode: mode, gid: 0, op: "chown"})
			cases = append(cases, scenario{typ: typ, mode: mode, gid: 0, op: "chown-self"})
			cases = append(cases, scenario{typ: typ, mode: mode, gid: 0, op: "chown-none"})
			for _, gid := range []int{0, 65534} {
				for _, op := range []string{"chown-self", "chgrp-self", "chown-none"} {
					cases = append(cases, scenario{typ: typ, mode: mode, gid: gid, op: op, nobody: true})
				}
			}
		}
	}
	result := func(dir string, i int, sc scenario) string {
		p := filepath.Join(dir, fmt.Sprintf("c%d", i))
		if err := unix.Mknod(p, types[sc.typ]|0o600, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		uid := 0
		if sc.nobody {
			uid = 65534
		}
		if err := os.Lchown(p, uid, sc.gid); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(p, sc.mode); err != nil {
			t.Fatal(err)
		}
		return runPrivOp(t, helper, sc.op, p, sc.nobody)
	}
	want := compareWithKernel(t, plain, ws.mountpoint, len(cases), func(i int) string {
		sc := cases[i]
		who := "root"
		if sc.nobody {
			who = "its owner, uid 65534"
		}
		return fmt.Sprintf("%s by %s of a %s, mode %04o, group %d", sc.op, who, sc.typ, sc.mode, sc.gid)
	}, func(dir string, i int) string { return result(dir, i, cases[i]) })
	cleared := 0
	for i, sc := range cases {
		if want[i] != fmt.Sprintf("mode %04o, capability false", sc.mode) {
			cleared++
		}
	}
	if cleared < len(cases)/2 {
		t.Errorf("only %d of %d cases cleared anything on the plain directory", cleared, len(cases))
	}
	t.Logf("%d cases, %d of them clear something", len(cases), cleared)
}

// modeBits turns set-ID bits of a mode into os.FileMode bits.
func modeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	return m
}
