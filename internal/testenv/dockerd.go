package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// PrivateDockerd starts a dockerd of the test's own with
// scripts/dockerd (no bridge, no iptables; its own socket, data and exec
// roots in a temporary directory), stops it when the test ends, and
// returns its endpoint, unix:///.../docker.sock. Nothing another test or
// a dockerd the machine runs holds is visible to it, nor it to them: a
// fake remote host's Engine, say. Needs root and Debian's docker.io.
func PrivateDockerd(t testing.TB) string {
	t.Helper()
	NeedRoot(t)
	NeedCommand(t, "dockerd")
	NeedCommand(t, "docker")
	script := filepath.Join(ModuleRoot(t), "scripts", "dockerd")
	// A short directory: a unix socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "sb-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	env := append(os.Environ(), "SEALBENCH_DOCKERD_RUN="+run, "SEALBENCH_DOCKERD_DATA="+filepath.Join(dir, "data"))
	script1 := func(arg string) ([]byte, error) {
		cmd := exec.Command(script, arg)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	t.Cleanup(func() {
		if out, err := script1("stop"); err != nil {
			t.Errorf("stopping the test's dockerd: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
	})
	if out, err := script1("start"); err != nil {
		t.Fatalf("starting a dockerd of the test's own: %v\n%s", err, out)
	}
	return "unix://" + filepath.Join(run, "docker.sock")
}
