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
	os.Exit(m.Run())
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
	needFUSE(t)
	plain := t.TempDir()
	ws := mountWS(t, newStore(t, ProfileDisposable), nil)
	if !ws.features.KillPrivV2 {
		t.Fatal("the kernel did not grant FUSE_HANDLE_KILLPRIV_V2")
	}
	// uid 65534 must reach both directories.
	for _, d := range []string{plain, filepath.Dir(plain), filepath.Dir(ws.mountpoint), filepath.Dir(filepath.Dir(ws.mountpoint))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary, where uid 65534 can run it.
	helper := filepath.Join(filepath.Dir(plain), "helper.test")
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(helper, bin, 0o755); err != nil {
		t.Fatal(err)
	}
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
		if sc.nobody {
			cmd := exec.Command(helper)
			cmd.Env = append(os.Environ(), "LAYERFS_PRIV_OP="+sc.op, "LAYERFS_PRIV_PATH="+p)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s as uid 65534 on %s: %v\n%s", sc.op, p, err, out)
			}
		} else if err := privOp(sc.op, p); err != nil {
			t.Fatalf("%s as root on %s: %v", sc.op, p, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		_, err := unix.Getxattr(p, xattrCaps, make([]byte, 64))
		hasCaps := err == nil
		if err != nil && !errors.Is(err, unix.ENODATA) {
			t.Fatalf("%s: reading %s: %v", p, xattrCaps, err)
		}
		return fmt.Sprintf("mode %04o, capability %v", st.Mode&0o7777, hasCaps)
	}
	cleared := 0
	for i, sc := range cases {
		want := result(plain, i, sc)
		got := result(ws.mountpoint, i, sc)
		who := "root"
		if sc.nobody {
			who = "uid 65534"
		}
		if got != want {
			t.Errorf("%s by %s of a %04o file (capability %v): workspace has %s, the kernel on a plain directory %s",
				sc.op, who, sc.mode, sc.caps, got, want)
		}
		if want != fmt.Sprintf("mode %04o, capability %v", sc.mode, sc.caps) {
			cleared++
		}
	}
	// The cases must exercise the clearing, not only its absence.
	if cleared < 10 {
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
