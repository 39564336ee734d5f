package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
)

func newTestRun(t *testing.T) (state string, run *Run) {
	t.Helper()
	state = t.TempDir()
	run, err := NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	return state, run
}

func TestNewRunRecordsItsDirectoryFirst(t *testing.T) {
	state, run := newTestRun(t)
	entries, warnings, err := ledger.Read(run.Dir)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}
	if len(entries) != 1 || entries[0].Kind != manifests.ResourceDir || entries[0].Key != run.Dir || entries[0].Target != "" {
		t.Fatalf("first entry: %+v", entries)
	}
	if fi, err := os.Stat(run.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run directory: %v %v", fi, err)
	}
	ids, err := ListRuns(state)
	if err != nil || len(ids) != 1 || ids[0] != run.ID {
		t.Errorf("ListRuns: %v %v", ids, err)
	}
	if err := manifests.ValidateRunID(NewRunID()); err != nil || len(NewRunID()) > 24 || NewRunID() == NewRunID() {
		t.Errorf("run ids: %v, %q", err, NewRunID())
	}
}

func TestLedgerReopenCutsAPartialLine(t *testing.T) {
	_, run := newTestRun(t)
	d := filepath.Join(run.Dir, "a")
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceDir, Key: d}); err != nil {
		t.Fatal(err)
	}
	run.Close()
	f, _ := os.OpenFile(filepath.Join(run.Dir, manifests.LedgerFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"formatVersion":1,"runId":"x","se`)
	f.Close()
	_, warnings, err := ledger.Read(run.Dir)
	if err != nil || len(warnings) != 1 {
		t.Fatalf("read: %v, warnings %v", err, warnings)
	}
	l, err := ledger.Open(run.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceDir, Key: filepath.Join(run.Dir, "b")}); err != nil {
		t.Fatal(err)
	}
	entries, warnings, err := ledger.Read(run.Dir)
	if err != nil || len(warnings) != 0 || len(entries) != 3 || entries[2].Seq != 3 {
		t.Fatalf("after reopening and recording: %v, %v, %+v", err, warnings, entries)
	}
}

// TestTeardownKeepsGoingAndNamesTheFailure: a step that fails (injected)
// does not stop the others; the error names the resource; the run
// directory (and ledger) stays so that teardown can be run again, and the
// second run finishes the job.
func TestTeardownKeepsGoingAndNamesTheFailure(t *testing.T) {
	_, run := newTestRun(t)
	var dirs []string
	for _, n := range []string{"one", "two", "three"} {
		d := filepath.Join(run.Dir, n)
		if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceDir, Key: d}); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(d, 0o700)
		dirs = append(dirs, d)
	}
	sock := filepath.Join(run.Dir, "s.sock")
	run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceSocket, Key: sock})
	os.WriteFile(sock, nil, 0o600)
	run.Close()

	failing := map[string]bool{dirs[1]: true, sock: true}
	var order []string
	res, err := Teardown(context.Background(), run.Dir, TeardownOptions{Remove: func(ctx context.Context, runDir string, e manifests.LedgerEntry) error {
		order = append(order, e.Key)
		if failing[e.Key] {
			return errors.New("injected failure")
		}
		return RemoveResource(ctx, runDir, e, 0)
	}})
	var me *multierror.Error
	if !errors.As(err, &me) || len(me.Errors) != 2 {
		t.Fatalf("teardown: %v, want two errors together", err)
	}
	for _, want := range []string{"dir " + dirs[1], "socket " + sock, "injected failure"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q:\n%v", want, err)
		}
	}
	if strings.Join(order, ",") != strings.Join([]string{sock, dirs[2], dirs[1], dirs[0]}, ",") {
		t.Errorf("order: %v, want newest first", order)
	}
	for _, d := range []string{dirs[0], dirs[2]} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s was not removed after the failure before it", d)
		}
	}
	if len(res.Kept) != 1 || res.Kept[0] != run.Dir {
		t.Errorf("kept %v, want the run directory", res.Kept)
	}
	// Fixed: the second teardown removes the rest, a third finds nothing.
	for i := range 2 {
		if _, err := Teardown(context.Background(), run.Dir, TeardownOptions{}); err != nil {
			t.Fatalf("teardown #%d: %v", i+2, err)
		}
	}
	if _, err := os.Stat(run.Dir); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
}

func TestTeardownRefusesPathsOutsideTheRun(t *testing.T) {
	_, run := newTestRun(t)
	outside := t.TempDir()
	e := manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: outside}
	if err := RemoveResource(context.Background(), run.Dir, e, 0); err == nil || !strings.Contains(err.Error(), "outside the run directory") {
		t.Fatalf("RemoveResource outside the run: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatal("removed a directory outside the run")
	}
}

// TestKillOnlyOurs: a process is killed through the ledger's argv marker;
// another process of the same binary without the marker is left alone,
// and a Proc whose start time no longer matches (a recycled pid) is not
// signalled.
func TestKillOnlyOurs(t *testing.T) {
	_, run := newTestRun(t)
	exe := shellCopy(t, run.Dir)
	marker := run.Dir + "/marker-ours"
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceProcess, Key: marker, Exe: exe}); err != nil {
		t.Fatal(err)
	}
	start := func(arg string) *exec.Cmd {
		c := exec.Command(exe, "-c", "sleep 1000", arg)
		// The group: teardown kills the shell, and its sleep must not outlive the test.
		startGroup(t, c)
		return c
	}
	ours, other := start(marker), start(run.Dir+"/marker-other")
	waitFor(t, func() bool { return len(FindProcs(MarkedBy(exe, marker))) == 1 })

	// A stale Proc (another start time) is refused.
	p := FindProcs(MarkedBy(exe, marker))[0]
	stale := p
	stale.StartTime--
	if err := Kill(context.Background(), stale, MarkedBy(exe, marker), time.Second); err != nil {
		t.Fatal(err)
	}
	if !alive(ours.Process.Pid) {
		t.Fatal("killed a process whose start time did not match")
	}

	if _, err := Teardown(context.Background(), run.Dir, TeardownOptions{Targets: []string{"local"}, Grace: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !alive(ours.Process.Pid) })
	if !alive(other.Process.Pid) {
		t.Error("teardown killed a process without our marker")
	}
}

func alive(pid int) bool {
	_, ok := readProc(pid)
	return ok
}

// startGroup starts c in a process group of its own, reaped in the
// background, and kills the group when the test ends: what a test leaves
// running, children included, must not outlive it.
func startGroup(t *testing.T, c *exec.Cmd) {
	t.Helper()
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
}

// shellCopy copies sh into dir and returns the copy's path: a program of
// its own, whose processes MarkedBy tells from any other sh's.
func shellCopy(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(testenv.NeedCommand(t, "sh"))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "sh")
	if err := os.WriteFile(exe, b, 0o700); err != nil {
		t.Fatal(err)
	}
	return exe
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// TestAuditFindsOrphans: a directory under runs/ without a ledger and a
// process running from a run directory are leftovers; --fix removes them.
func TestAuditFindsOrphans(t *testing.T) {
	state := t.TempDir()
	runs := RunsDir(state)
	stray := filepath.Join(runs, ".new-20261129T000000-abcdef")
	os.MkdirAll(stray, 0o700)
	c := exec.Command(shellCopy(t, stray), "-c", "sleep 1000")
	startGroup(t, c)

	ctx := context.Background()
	opts := AuditOptions{StateDir: state, Targets: []string{TargetLocal}}
	res, err := Audit(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Leftovers {
		got = append(got, r.String())
	}
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "dir "+stray) || !strings.Contains(all, "process pid") {
		t.Fatalf("audit found:\n%s", all)
	}
	after, err := Fix(ctx, opts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Leftovers) > 0 {
		t.Errorf("after --fix: %v", after.Leftovers)
	}
	if alive(c.Process.Pid) {
		t.Error("the orphan process still runs")
	}
}

// TestMountsAreFoundAndDetachedBeforeRemoval: a mount under a run (FUSE
// or, here, tmpfs) is a leftover the audit lists from mountinfo; teardown
// detaches it before removing the directory that holds it, so removal never
// reaches into the mounted filesystem.
func TestMountsAreFoundAndDetachedBeforeRemoval(t *testing.T) {
	testenv.NeedRoot(t)
	state, run := newTestRun(t)
	ws := filepath.Join(run.Dir, "ws")
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceDir, Key: ws}); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(ws, 0o700)
	mp := filepath.Join(ws, "mnt")
	os.Mkdir(mp, 0o700)
	// Not in the ledger on purpose: as if the crash came between the mount
	// and its entry (which the real code never allows), or a child mounted it.
	if err := unix.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Skip(t, "cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mp, unix.MNT_DETACH) })
	keep := filepath.Join(mp, "keep")
	os.WriteFile(keep, []byte("x"), 0o600)
	// Hold the mounted filesystem open, so that a removal that reached into
	// it would show: the file would be gone.
	f, err := os.Open(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	res, err := Audit(context.Background(), AuditOptions{StateDir: state, Targets: []string{TargetLocal}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.Leftovers {
		found = found || r.Kind == manifests.ResourceMount && r.Key == mp && r.Run == run.ID
	}
	if !found {
		t.Fatalf("audit does not list the mount %s: %v", mp, res.Leftovers)
	}
	run.Close()
	if _, err := Teardown(context.Background(), run.Dir, TeardownOptions{}); err != nil {
		t.Fatal(err)
	}
	if ms, _ := MountsUnder(run.Dir); len(ms) > 0 {
		t.Errorf("still mounted: %v", ms)
	}
	if ents, err := f.ReadDir(-1); err != nil || len(ents) != 1 || ents[0].Name() != "keep" {
		t.Errorf("the mounted filesystem was emptied by the removal: %v %v", ents, err)
	}
}

func TestListErrorsHasNoBlankLines(t *testing.T) {
	var inner, outer *multierror.Error
	inner = multierror.Append(inner, errors.New("image x: in use"), errors.New("process 12: still running"))
	inner.ErrorFormat = ListErrors
	outer = multierror.Append(outer, fmt.Errorf("run a: %w", inner), errors.New("run b: gone"))
	outer.ErrorFormat = ListErrors
	got := outer.Error()
	want := "2 errors:\n  - run a: 2 errors:\n      - image x: in use\n      - process 12: still running\n  - run b: gone"
	if got != want {
		t.Errorf("ListErrors:\n%s\nwant:\n%s", got, want)
	}
}

// holdLock starts a process that holds the lock of the run in dir until
// the test ends: a run in progress, as its own process holds it.
func holdLock(t *testing.T, dir string) {
	t.Helper()
	flock := testenv.NeedCommand(t, "flock")
	c := exec.Command(flock, "--exclusive", filepath.Join(dir, LockFile), "sleep", "600")
	startGroup(t, c)
	// The holder's pid, as a run's process writes its own.
	if err := os.WriteFile(filepath.Join(dir, LockFile), []byte(fmt.Sprint(c.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { busy, _ := InProgress(dir); return busy })
}

// TestARunInProgressIsLeftAlone: while another process holds a run's
// lock, no other command takes the run down: TakeOver refuses it,
// naming the run, and `audit --fix` leaves its directory and the process
// its ledger names, with a note; forced, it tears the run down.
func TestARunInProgressIsLeftAlone(t *testing.T) {
	state, run := newTestRun(t)
	exe := shellCopy(t, run.Dir)
	marker := run.Dir + "/marker-busy"
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceProcess, Key: marker, Exe: exe}); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, "-c", "sleep 1000", marker)
	startGroup(t, c)
	waitFor(t, func() bool { return len(FindProcs(MarkedBy(exe, marker))) == 1 })
	run.Close() // this process lets the lock go; another holds it from now on
	holdLock(t, run.Dir)

	var ip *InProgressError
	if _, err := TakeOver(run.Dir, false); !errors.As(err, &ip) || ip.Run != run.ID {
		t.Fatalf("TakeOver of a run in progress: %v, want an *InProgressError naming run %s", err, run.ID)
	}
	ctx := context.Background()
	res, err := Fix(ctx, AuditOptions{StateDir: state}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(run.Dir); err != nil {
		t.Fatalf("audit --fix removed the directory of a run in progress: %v", err)
	}
	if !alive(c.Process.Pid) {
		t.Fatal("audit --fix killed the process of a run in progress")
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "run "+run.ID+" is in progress") {
		t.Errorf("audit notes %q: want the run in progress named", res.Notes)
	}
	res, err = Fix(ctx, AuditOptions{StateDir: state, Force: true}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) != 0 {
		t.Errorf("after audit --fix --force: %v", res.Leftovers)
	}
	if _, err := os.Stat(run.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("audit --fix --force left the run directory: %v", err)
	}
	waitFor(t, func() bool { return !alive(c.Process.Pid) })
}
