package bundle

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/scratch"
	"github.com/sealbench/sealbench/internal/testenv"
)

// The environment that makes this test binary a seal to be killed
// (sealHelper), instead of running the tests.
const (
	helperOut    = "SEALBENCH_TEST_SEAL_OUT"    // the seal's --out
	helperSource = "SEALBENCH_TEST_SEAL_SOURCE" // the source to seal
	helperGo     = "SEALBENCH_TEST_SEAL_GO"     // the go command
	helperKeys   = "SEALBENCH_TEST_SEAL_KEYS"   // where to write its key pair (the test removes it: the helper is killed)
)

func TestMain(m *testing.M) {
	if out := os.Getenv(helperOut); out != "" {
		os.Exit(sealHelper(out))
	}
	os.Exit(m.Run())
}

// sealHelper seals with a real key and the fake go command, as `sealbench
// seal` would, until it is killed.
func sealHelper(out string) int {
	priv, _, err := sign.WriteKeyPair(os.Getenv(helperKeys), nil, false)
	if err == nil {
		var s *sign.Signer
		if s, err = sign.LoadPrivateKey(priv, nil); err == nil {
			_, err = Seal(context.Background(), SealOptions{Source: os.Getenv(helperSource), OutDir: out, Signer: s, GoBinary: os.Getenv(helperGo)})
		}
	}
	fmt.Fprintln(os.Stderr, "seal helper:", err)
	return 1
}

// fakeGo is a go command that builds each package as a small file, or,
// when $FAKE_GO_HANG names a file, starts a child that does not end (as
// go build starts compilers), writes its own pid and the child's there,
// and waits.
const fakeGo = `#!/bin/sh
case "$1" in
env) echo go1.99-fake; exit 0 ;;
build) ;;
*) exit 2 ;;
esac
out= prev=
for a in "$@"; do
	[ "$prev" = -o ] && out=$a
	prev=$a
done
if [ -n "$FAKE_GO_HANG" ]; then
	sleep 3600 &
	echo "$$ $!" > "$FAKE_GO_HANG.tmp" && mv "$FAKE_GO_HANG.tmp" "$FAKE_GO_HANG"
	wait
	exit 1
fi
for a in "$@"; do
	case "$a" in ./*) echo "fake $a" > "$out/$(basename "$a")" ;; esac
done
`

// TestKilledSealLeavesNothing kills a seal (kill -9) while its go command
// builds: the go command and the child it started die with it; the
// staging directory it leaves is removed by the next seal, which leaves
// nothing in --out but the bundle and its tar.
func TestKilledSealLeavesNothing(t *testing.T) {
	if runtime.GOOS != "linux" {
		testenv.Skip(t, "only Linux tells a child that its parent died (Pdeathsig)")
	}
	testenv.NeedCommand(t, "git")
	testenv.NeedCommand(t, "sleep")
	root := testenv.ModuleRoot(t)
	goBin := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pids")

	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperOut+"="+out, helperSource+"="+root, helperGo+"="+goBin, helperKeys+"="+t.TempDir(), "FAKE_GO_HANG="+pidFile)
	var stderr bytes.Buffer
	helper.Stderr = &stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	var pids []int
	for pids == nil {
		select {
		case err := <-exited:
			t.Fatalf("the seal ended before its build started: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
	}
	if staging := stagingIn(t, out); len(staging) == 0 {
		t.Errorf("no staging directory in %s mid-build", out)
	}
	helper.Process.Kill() // SIGKILL: no handler, no defer runs
	<-exited

	for _, pid := range pids {
		if !gone(pid, time.Minute) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d (the go command or its child) outlived the seal that started it", pid)
		}
	}

	// The next seal sweeps the killed one's staging directory away.
	var log strings.Builder
	res, err := Seal(context.Background(), SealOptions{Source: root, OutDir: out, Signer: newKeys(t).signer, GoBinary: goBin,
		Log: func(f string, args ...any) { fmt.Fprintf(&log, f+"\n", args...) }})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(out)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{res.Name, res.Name + ".tar"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("after a killed seal and another, %s holds %v, want %v", out, names, want)
	}
	if !strings.Contains(log.String(), "left by a seal that was stopped") {
		t.Errorf("the second seal does not say it removed the first's staging directory:\n%s", log.String())
	}
}

// stagingIn lists what in dir is neither a bundle nor its tar.
func stagingIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), scratch.Prefix) {
			s = append(s, e.Name())
		}
	}
	return s
}

// gone waits up to patience for pid to exit (a zombie counts as gone: it
// runs nothing, and its parent may be an init that does not reap).
func gone(pid int, patience time.Duration) bool {
	for deadline := time.Now().Add(patience); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
