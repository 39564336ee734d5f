//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

func TestMain(m *testing.M) {
	if IsInit() {
		InitMain()
	}
	os.Exit(m.Run())
}

// busyboxRoot makes a lower directory holding a busybox root filesystem.
func busyboxRoot(t testing.TB) string {
	t.Helper()
	bb := testenv.NeedCommand(t, "busybox")
	out, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bin", "etc", "tmp", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat", "id", "ls", "sleep", "true", "false", "echo", "mount", "unshare", "ps", "hostname"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "etc/group"), []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	return dir
}

func testSpec(t testing.TB, lower string) *Spec {
	state := t.TempDir()
	s := &Spec{
		ID:        "test",
		Hostname:  "sandbox-test",
		RootfsDir: filepath.Join(state, "rootfs"),
		LowerDirs: []string{lower},
		UpperDir:  filepath.Join(state, "upper"),
		WorkDir:   filepath.Join(state, "work"),
		Process:   Process{Args: []string{"sleep", "1000"}},
	}
	for _, d := range []string{s.RootfsDir, s.UpperDir, s.WorkDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	s.Caps, err = GrantedCaps(nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s.Seccomp = true
	return s
}

func startSandbox(t testing.TB, s *Spec) *Sandbox {
	t.Helper()
	sb, err := Start(s, devNull(t), devNull(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sb.Kill()
		<-sb.Done()
	})
	return sb
}

func devNull(t testing.TB) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// run execs args and returns stdout, stderr and the status.
func run(t *testing.T, sb *Sandbox, p Process) (string, string, int) {
	t.Helper()
	or, ow, _ := os.Pipe()
	er, ew, _ := os.Pipe()
	proc, err := sb.Exec(&p, nil, ow, ew)
	ow.Close()
	ew.Close()
	if err != nil {
		or.Close()
		er.Close()
		if ee, ok := err.(*ExecError); ok {
			return "", ee.Msg, ee.Status
		}
		t.Fatalf("exec %v: %v", p.Args, err)
	}
	var ob, eb bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&eb, er); close(done) }()
	io.Copy(&ob, or)
	<-done
	or.Close()
	er.Close()
	st, _, err := proc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return ob.String(), eb.String(), st
}

func TestSandboxExec(t *testing.T) {
	testenv.NeedRoot(t)
	s := testSpec(t, busyboxRoot(t))
	sb := startSandbox(t, s)

	out, _, st := run(t, sb, Process{Args: []string{"hostname"}})
	if st != 0 || strings.TrimSpace(out) != "sandbox-test" {
		t.Errorf("hostname: %q, status %d", out, st)
	}
	out, errOut, st := run(t, sb, Process{Args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if out != "out\n" || errOut != "err\n" || st != 3 {
		t.Errorf("streams: out %q err %q status %d", out, errOut, st)
	}
	_, _, st = run(t, sb, Process{Args: []string{"no-such-command"}})
	if st != 127 {
		t.Errorf("missing command: status %d, want 127", st)
	}
	out, _, _ = run(t, sb, Process{Args: []string{"cat", "/proc/self/status"}})
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapPrm:\t0000000000000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("unprivileged exec: /proc/self/status lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = run(t, sb, Process{Args: []string{"cat", "/proc/self/status"}, Privileged: true})
	if !strings.Contains(out, "NoNewPrivs:\t0") || strings.Contains(out, "CapEff:\t0000000000000000") {
		t.Errorf("privileged exec kept nothing:\n%s", out)
	}
	out, _, _ = run(t, sb, Process{Args: []string{"ls", "/proc/self/fd"}})
	if strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != "0 1 2 3" {
		// 3 is ls's own directory handle.
		t.Errorf("open fds: %q, want 0 1 2 (and ls's 3)", out)
	}
	out, _, _ = run(t, sb, Process{Args: []string{"id"}, User: "nobody"})
	if !strings.Contains(out, "uid=65534") {
		t.Errorf("id as nobody: %q", out)
	}
	_, _, st = run(t, sb, Process{Args: []string{"mount", "-t", "tmpfs", "x", "/tmp"}})
	if st == 0 {
		t.Error("unprivileged mount succeeded")
	}
	_, _, st = run(t, sb, Process{Args: []string{"unshare", "-U", "true"}})
	if st == 0 {
		t.Error("unprivileged unshare -U succeeded")
	}
}
