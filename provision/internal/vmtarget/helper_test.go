package vmtarget

import (
	"os"
	"strings"
	"testing"
)

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
