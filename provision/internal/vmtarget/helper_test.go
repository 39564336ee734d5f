package vmtarget

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenPrivateReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // the socket file stays, as a dead helper leaves it
	ln, err := ListenPrivate("test", path)
	if err != nil {
		t.Fatalf("ListenPrivate over a stale socket: %v", err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v: want mode 0600", fi, err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dialling the new socket: %v", err)
	}
	c.Close()
}

func TestHelperCommand(t *testing.T) {
	exe, _ := os.Executable()
	if cmd, err := HelperCommand("qemu", "link", nil, "qemu-link"); err != nil || len(cmd) != 2 || cmd[0] != exe || cmd[1] != "qemu-link" {
		t.Errorf("HelperCommand = %q, %v; want this executable and the subcommand", cmd, err)
	}
	if cmd, err := HelperCommand("qemu", "link", []string{"/bin/x", "a"}, "qemu-link"); err != nil || strings.Join(cmd, " ") != "/bin/x a" {
		t.Errorf("HelperCommand with a command = %q, %v; want it as given", cmd, err)
	}
	if _, err := HelperCommand("qemu", "link", []string{"x"}, "qemu-link"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative helper binary: %v, want it refused", err)
	}
}
