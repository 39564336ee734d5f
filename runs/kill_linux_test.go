package runs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// exitedOrGone reports whether pid has exited: no such process, or a
// zombie not yet reaped.
func exitedOrGone(pid int) bool {
	st, ok := statProc(pid)
	return !ok || st.state == 'Z'
}

// TestKillReturnsOnlyOnceTheProcessHasExited: a process of ours that
// ignores SIGTERM, and whose command line no longer matches what it was
// found by (it exec'd, as Lima's QEMU wrapper becomes QEMU), is the same
// process (its pid and start time): Kill escalates to SIGKILL after the
// grace and returns only once it has exited.
func TestKillReturnsOnlyOnceTheProcessHasExited(t *testing.T) {
	_, run := newTestRun(t)
	testenv.NeedCommand(t, "sleep")
	exe := shellCopy(t, run.Dir)
	marker := run.Dir + "/marker-stubborn"
	// SIGTERM ignored survives exec: the sleep ignores it too.
	c := exec.Command(exe, "-c", `trap "" TERM; read go; exec sleep 1000`, marker)
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	startGroup(t, c)
	match := MarkedBy(exe, marker)
	waitFor(t, func() bool { return len(FindProcs(match)) == 1 })
	p := FindProcs(match)[0]
	stdin.Write([]byte("go\n"))
	waitFor(t, func() bool {
		now, ok := readProc(p.Pid)
		return ok && len(now.Argv) > 0 && now.Argv[0] == "sleep"
	})

	if err := Kill(context.Background(), p, match, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !exitedOrGone(p.Pid) {
		t.Fatalf("Kill returned while %s is still alive (state %c)", p, stateOf(p.Pid))
	}
}

func init() {
	helpers["exiting"] = exitingHelper
}

// exitingHelper is a process as one looks while it exits: alive, with
// no command line (its arguments' end set to their start, which takes
// CAP_SYS_RESOURCE), holding a file under $DIR open. It says "ready" (or
// why not) and waits to be killed.
func exitingHelper() {
	f, err := os.Create(filepath.Join(os.Getenv("DIR"), "held"))
	if err == nil {
		defer f.Close()
		err = clearCmdline()
	}
	if err != nil {
		fmt.Println("cannot:", err)
		return
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// clearCmdline sets the end of this process's arguments to their start,
// so that /proc/self/cmdline reads empty: with PR_SET_MM_ARG_END where
// the process has CAP_SYS_RESOURCE, else with PR_SET_MM_MAP (the whole
// map as it is, but arg_end; CAP_CHECKPOINT_RESTORE).
func clearCmdline() error {
	st, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	if len(f) < 49 {
		return fmt.Errorf("/proc/self/stat has %d fields after the name", len(f))
	}
	field := func(n int) uint64 { // n as proc(5) numbers them
		v, _ := strconv.ParseUint(f[n-3], 10, 64)
		return v
	}
	err = unix.Prctl(unix.PR_SET_MM, unix.PR_SET_MM_ARG_END, uintptr(field(48)), 0, 0)
	if err == nil {
		return nil
	}
	brk, _, _ := unix.Syscall(unix.SYS_BRK, 0, 0, 0)
	m := struct {
		startCode, endCode, startData, endData, startBrk, brk, startStack, argStart, argEnd, envStart, envEnd uint64
		auxv                                                                                                  uintptr
		auxvSize, exeFD                                                                                       uint32
	}{field(26), field(27), field(45), field(46), field(47), uint64(brk), field(28), field(48), field(48), field(50), field(51), 0, 0, ^uint32(0)}
	if err2 := unix.Prctl(unix.PR_SET_MM, unix.PR_SET_MM_MAP, uintptr(unsafe.Pointer(&m)), unsafe.Sizeof(m), 0); err2 != nil {
		return fmt.Errorf("PR_SET_MM_ARG_END: %v; PR_SET_MM_MAP: %v", err, err2)
	}
	return nil
}

// TestAuditListsAProcessThatHasNotExited: a process that shows no command
// line, as one does while it exits (a QEMU freeing its guest's memory
// after limactl stop -f), but still holds a file in a run directory, is
// not gone: the audit lists it, the run's process entry still exists,
// and `audit --fix` kills it (it ignores SIGTERM) and returns once it
// has exited.
func TestAuditListsAProcessThatHasNotExited(t *testing.T) {
	testenv.NeedRoot(t)
	state, run := newTestRun(t)
	dir := filepath.Join(run.Dir, "vm")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "qemu.pid")
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceProcess, Key: marker, Exe: "/usr/bin/qemu-system-x86_64"}); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), helperEnv+"=exiting", "DIR="+dir)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
	line, _ := bufio.NewReader(out).ReadString('\n')
	go c.Wait()
	if line = strings.TrimSpace(line); line != "ready" {
		testenv.Skip(t, "the helper cannot look like an exiting process here: %s", line)
	}
	pid := c.Process.Pid

	ctx := context.Background()
	if ok, detail, err := Exists(ctx, run.Dir, run.Ledger.Entries()[1]); err != nil || !ok {
		t.Errorf("the process entry is shown gone (%v, %q, %v) while pid %d lives", ok, detail, err, pid)
	}
	res, err := Audit(ctx, AuditOptions{StateDir: state, Targets: []string{TargetLocal}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.Leftovers {
		found = found || r.Kind == manifests.ResourceProcess && r.Key == "pid "+strconv.Itoa(pid) && r.Run == run.ID
	}
	if !found {
		t.Fatalf("the audit does not list pid %d, alive with no command line: %v", pid, res.Leftovers)
	}
	run.Close()
	after, err := Fix(ctx, AuditOptions{StateDir: state, Targets: []string{TargetLocal}}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !exitedOrGone(pid) {
		t.Errorf("audit --fix returned while pid %d is alive (state %c)", pid, stateOf(pid))
	}
	if len(after.Leftovers) != 0 {
		t.Errorf("after --fix: %v", after.Leftovers)
	}
}

// TestRemoteKillWaitsUntilTheProcessHasExited: on a remote host (a fake
// host, this machine), a process of ours that answers SIGTERM by
// exec'ing something that ignores it (its command line no longer what it
// was found by) is followed by its pid and start time: teardown's kill
// there sends SIGKILL after the grace and returns only once it has
// exited.
func TestRemoteKillWaitsUntilTheProcessHasExited(t *testing.T) {
	hst := sshtest.Start(t, "127.0.0.2")
	testenv.NeedCommand(t, "sleep")
	dir := t.TempDir()
	exe := shellCopy(t, dir)
	marker := dir + "/marker-remote"
	c := exec.Command(exe, "-c", `trap 'trap "" TERM; exec sleep 1000' TERM; while :; do sleep 0.05; done`, marker)
	startGroup(t, c)
	match := MarkedBy(exe, marker)
	waitFor(t, func() bool { return len(FindProcs(match)) == 1 })

	ctx := context.Background()
	cl, err := sshx.Dial(ctx, hst.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	h := &remoteHost{host: fmt.Sprintf("ssh://%s@%s:%d", hst.User, hst.Addr, hst.Port), c: cl}
	if err := h.kill(ctx, match, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !exitedOrGone(c.Process.Pid) {
		now, _ := readProc(c.Process.Pid)
		t.Fatalf("kill on the host returned while pid %d is alive (state %c, now %q)", c.Process.Pid, stateOf(c.Process.Pid), now.Argv)
	}
}
