//go:build linux

package sandbox

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestGrantedCaps(t *testing.T) {
	has := func(cs []Cap, c Cap) bool {
		for _, x := range cs {
			if x == c {
				return true
			}
		}
		return false
	}
	def, err := GrantedCaps(nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(def) != len(DefaultCaps) || has(def, unix.CAP_SYS_ADMIN) || has(def, unix.CAP_MKNOD) || !has(def, unix.CAP_CHOWN) {
		t.Errorf("default set: %v", def)
	}
	c, _ := GrantedCaps([]string{"sys_admin"}, []string{"CAP_CHOWN"}, false)
	if !has(c, unix.CAP_SYS_ADMIN) || has(c, unix.CAP_CHOWN) {
		t.Errorf("add SYS_ADMIN, drop CHOWN: %v", c)
	}
	c, _ = GrantedCaps([]string{"KILL"}, []string{"ALL"}, false)
	if len(c) != 1 || c[0] != unix.CAP_KILL {
		t.Errorf("drop ALL, add KILL: %v", c)
	}
	c, _ = GrantedCaps(nil, []string{"ALL"}, true)
	if len(c) != len(capNames) {
		t.Errorf("privileged: %d caps, want all %d", len(c), len(capNames))
	}
	if _, err := GrantedCaps([]string{"CAP_NOPE"}, nil, false); err == nil || !strings.Contains(err.Error(), "CapAdd") {
		t.Errorf("unknown capability: %v", err)
	}
	if unix.CAP_SYS_ADMIN != 21 || Cap(unix.CAP_SYS_ADMIN).String() != "CAP_SYS_ADMIN" {
		t.Errorf("names: %v", Cap(unix.CAP_SYS_ADMIN))
	}
}

func TestSpecValidateNamesEveryField(t *testing.T) {
	s := &Spec{
		RootfsDir: "/a,b", LowerDirs: []string{"/l"}, UpperDir: "/u", WorkDir: "/w",
		Mounts:  []Mount{{Type: "volume", Target: "rel"}, {Type: "bind", Source: "rel", Target: "/x"}},
		Devices: []Device{{Host: "dev/fuse", Container: "/dev/fuse"}},
	}
	err := s.Validate()
	if err == nil {
		t.Fatal("an invalid spec passed")
	}
	for _, want := range []string{"ID", "overlay path \"/a,b\"", "Mounts[0].Target", "Mounts[0].Type", "Mounts[1].Source", "Devices[0]", "Process.Args"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestSeccompProgramJumpsLand(t *testing.T) {
	prog, err := seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range prog {
		if f.Code&0x07 == unix.BPF_JMP {
			for _, off := range []uint8{f.Jt, f.Jf} {
				if j := i + 1 + int(off); j >= len(prog) {
					t.Errorf("instruction %d jumps to %d, past the end (%d)", i, j, len(prog))
				}
			}
		}
	}
	if last := prog[len(prog)-4]; last.Code != unix.BPF_RET|unix.BPF_K || last.K != unix.SECCOMP_RET_ALLOW {
		t.Errorf("the allow return is not where the jumps expect it: %+v", last)
	}
}
