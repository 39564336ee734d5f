//go:build linux

package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// The test binary doubles as layerfsd, with the same main: the tests run it
// as a subprocess, and `mount` re-executes it as the daemon.
func TestMain(m *testing.M) {
	if os.Getenv("LAYERFSD_TEST_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// The daemons the tests start must not hold what this process
	// inherited (a lock flock(1) holds for the run, say): a daemon left
	// behind by a failing test would hold it too.
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	os.Exit(m.Run())
}

type result struct {
	stdout, stderr string
	code           int
}

func layerfsd(t *testing.T, args ...string) result {
	t.Helper()
	return layerfsdEnv(t, nil, args...)
}

// layerfsdEnv is layerfsd with more environment.
func layerfsdEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "LAYERFSD_TEST_MAIN=1"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("layerfsd %s: hung: %v", strings.Join(args, " "), ctx.Err())
	}
	r := result{out.String(), errb.String(), 0}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("layerfsd %s: %v", strings.Join(args, " "), err)
	}
	return r
}

func expect(t *testing.T, r result, code int, args ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("layerfsd %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
}

func run(t *testing.T, code int, args ...string) result {
	t.Helper()
	r := layerfsd(t, args...)
	expect(t, r, code, args...)
	return r
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	run(t, daemonapi.ExitStore, "log", "--store", filepath.Join(dir, "missing"))
	run(t, daemonapi.ExitStore, "log", "--store", t.TempDir())
	run(t, daemonapi.ExitUsage, "log")
	run(t, daemonapi.ExitUsage, "log", "--store", store, "--no-such-flag")
	run(t, daemonapi.ExitUsage, "init", "--store", store, "--profile", "sometimes")
	run(t, daemonapi.ExitUsage, "mount", "--store", store, "--workspace", dir, "--control", filepath.Join(dir, "c"), "--fuse-transport", "io_uring")
	run(t, daemonapi.ExitOK, "init", "--store", store, "--profile", "fast")
	run(t, daemonapi.ExitUsage, "init", "--store", store)
	run(t, daemonapi.ExitUsage, "import", "--store", store, "--from", filepath.Join(dir, "no-such-source"))
	r0 := run(t, daemonapi.ExitOK, "import", "--store", store, "--from", t.TempDir(), "-m", "empty")
	id := strings.TrimSpace(r0.stdout)
	if r := run(t, daemonapi.ExitOK, "show", "--store", store, id[:6]); !strings.Contains(r.stdout, id) {
		t.Errorf("show: %q", r.stdout)
	}
	r := run(t, daemonapi.ExitLayer, "diff", "--store", store, "abcd", "ef01", "--json")
	var e daemonapi.Error
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || e.ExitCode != daemonapi.ExitLayer || e.Message == "" {
		t.Errorf("--json error: %q (%v)", r.stdout, err)
	}
	// Nobody listens on the socket.
	run(t, daemonapi.ExitNoAnswer, "stats", "--control", filepath.Join(dir, "nobody.sock"))
	// Someone listens but never answers: a timeout, not a hang.
	sock := filepath.Join(dir, "mute.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	run(t, daemonapi.ExitNoAnswer, "stats", "--control", sock, "--timeout", "300ms")
	run(t, daemonapi.ExitNoAnswer, "commit", "--control", sock, "--timeout", "300ms")
	// A Store from a newer schema.
	db, err := sql.Open("sqlite", filepath.Join(store, "layerfs.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Exec("PRAGMA user_version = 42")
	db.Close()
	r = run(t, daemonapi.ExitStore, "log", "--store", store)
	if !strings.Contains(r.stderr, "newer") {
		t.Errorf("newer schema error does not say so: %s", r.stderr)
	}
	r = run(t, daemonapi.ExitOK, "--help")
	if !strings.Contains(r.stdout, "Exit codes") {
		t.Errorf("--help does not document exit codes:\n%s", r.stdout)
	}
}

func needFUSE(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
}

type env struct {
	dir, store, mnt, ctl string
}

func newEnv(t *testing.T, profile string) *env {
	dir := t.TempDir()
	e := &env{dir: dir, store: filepath.Join(dir, "store"), mnt: filepath.Join(dir, "mnt"), ctl: filepath.Join(dir, "ctl.sock")}
	if err := os.Mkdir(e.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, daemonapi.ExitOK, "init", "--store", e.store, "--profile", profile)
	t.Cleanup(func() {
		// Whatever a failed test left: the daemon, then the mount.
		if b, err := os.ReadFile(filepath.Join(e.store, "mount.json")); err == nil {
			var r struct{ PID int }
			if json.Unmarshal(b, &r) == nil && r.PID > 0 {
				syscall.Kill(r.PID, syscall.SIGKILL)
			}
		}
		syscall.Unmount(e.mnt, syscall.MNT_DETACH)
	})
	return e
}

func (e *env) mount(t *testing.T) *daemonapi.ReadyInfo {
	t.Helper()
	r := run(t, daemonapi.ExitOK, daemonapi.MountCmd{Store: e.store, Workspace: e.mnt, Control: e.ctl, FuseTransport: "dev"}.Args()...)
	info, err := daemonapi.DecodeReady([]byte(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// processGone waits, up to testenv.Patience, for pid to be gone: a zombie
// until its parent reaps it; the daemon's parent has exited, so init
// reaps it.
func processGone(pid int) bool {
	for deadline := time.Now().Add(testenv.Patience); time.Now().Before(deadline); {
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestLifecycle(t *testing.T) {
	needFUSE(t)
	e := newEnv(t, "fast")
	src := filepath.Join(e.dir, "src")
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d/f"), []byte("base"), 0o644)
	base := strings.TrimSpace(run(t, daemonapi.ExitOK, "import", "--store", e.store, "--from", src, "-m", "base").stdout)
	info := e.mount(t)
	if info.Layer != base {
		t.Errorf("mounted %q, want %q", info.Layer, base)
	}
	// The store is locked; a second mount elsewhere fails clearly.
	other := filepath.Join(e.dir, "other")
	os.Mkdir(other, 0o755)
	run(t, daemonapi.ExitBusy, "mount", "--store", e.store, "--workspace", other, "--control", filepath.Join(e.dir, "other.sock"))
	// A mount point that is not empty.
	e2 := newEnv(t, "disposable")
	os.WriteFile(filepath.Join(e2.mnt, "junk"), nil, 0o644)
	run(t, daemonapi.ExitMountpt, "mount", "--store", e2.store, "--workspace", e2.mnt, "--control", e2.ctl)
	if st, err := os.Stat(filepath.Join(e.mnt, "d/f")); err != nil || st.Size() != 4 {
		t.Fatalf("workspace shows %v %v", st, err)
	}
	os.WriteFile(filepath.Join(e.mnt, "d/g"), []byte("new"), 0o644)
	id := strings.TrimSpace(run(t, daemonapi.ExitOK, "commit", "--control", e.ctl, "-m", "two").stdout)
	if len(id) != 64 {
		t.Fatalf("commit printed %q", id)
	}
	if out := strings.TrimSpace(run(t, daemonapi.ExitOK, "commit", "--control", e.ctl).stdout); out != "UpToDate" {
		t.Fatalf("second commit printed %q", out)
	}
	st, err := daemonapi.DecodeStats([]byte(run(t, daemonapi.ExitOK, "stats", "--control", e.ctl, "--json").stdout))
	if err != nil {
		t.Fatal(err)
	}
	if st.Base != id || st.Requests["CREATE"].Count == 0 || st.MountNs == 0 || st.LastCommitNs == 0 || st.StoreUsage.BlobBytes == 0 {
		t.Errorf("stats: %+v", st)
	}
	if fi, err := os.Stat(e.ctl); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket mode: %v %v", fi, err)
	}
	var log []map[string]any
	if err := json.Unmarshal([]byte(run(t, daemonapi.ExitOK, "log", "--store", e.store, "--json").stdout), &log); err != nil || len(log) != 2 {
		t.Fatalf("log: %v %v", log, err)
	}
	diff := run(t, daemonapi.ExitOK, "diff", "--store", e.store, base[:8], id[:8]).stdout
	if !strings.Contains(diff, "A /d/g") {
		t.Errorf("diff: %q", diff)
	}
	run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
	if !processGone(info.PID) {
		t.Errorf("daemon %d still running after unmount", info.PID)
	}
	if _, err := os.Stat(e.ctl); err == nil {
		t.Errorf("control socket left behind")
	}
	// Remount: the new Layer by default.
	info = e.mount(t)
	if info.Layer != id {
		t.Errorf("remount shows %s, want newest %s", info.Layer, id)
	}
	run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
	processGone(info.PID)
}

// TestUnmountOpenFile: a file still open does not make unmount hang; it
// waits a bounded time, then unmounts lazily and the daemon exits.
func TestUnmountOpenFile(t *testing.T) {
	needFUSE(t)
	e := newEnv(t, "disposable")
	info := e.mount(t)
	f, err := os.Create(filepath.Join(e.mnt, "open"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	r := run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl, "--json")
	res, err := daemonapi.DecodeUnmount([]byte(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Lazy {
		t.Errorf("unmount with an open file was not lazy: %+v", res)
	}
	if !processGone(info.PID) {
		t.Errorf("daemon %d still running", info.PID)
	}
	f.Close()
	if ents, err := os.ReadDir(e.mnt); err != nil || len(ents) != 0 {
		t.Errorf("mount point after lazy unmount: %v %v", ents, err)
	}
}

// TestCrash kills the daemon with SIGKILL during Commits, again and again.
// A Durable Store must then pass integrity_check and hold every Commit that
// was acknowledged, and the next mount must clean up the dead mount and say so.
func TestCrash(t *testing.T) {
	needFUSE(t)
	rounds := 8
	if testing.Short() {
		rounds = 2
	}
	e := newEnv(t, "durable")
	rng := rand.New(rand.NewSource(1))
	var acked []string
	info := e.mount(t)
	for round := 0; round < rounds; round++ {
		// Work for the Commit to do.
		for i := 0; i < 20; i++ {
			b := make([]byte, 256<<10)
			rng.Read(b)
			p := filepath.Join(e.mnt, "r"+itoa(round), "f"+itoa(i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// One acknowledged Commit, then one that is killed.
		id := strings.TrimSpace(run(t, daemonapi.ExitOK, "commit", "--control", e.ctl, "-m", "ok "+itoa(round)).stdout)
		acked = append(acked, id)
		os.WriteFile(filepath.Join(e.mnt, "r"+itoa(round), "late"), []byte("late"), 0o644)
		cmd := exec.Command(os.Args[0], "commit", "--control", e.ctl, "-m", "killed "+itoa(round))
		cmd.Env = append(os.Environ(), "LAYERFSD_TEST_MAIN=1")
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
		syscall.Kill(info.PID, syscall.SIGKILL)
		if err := cmd.Wait(); err == nil {
			// Acknowledged before the kill: it must survive.
			acked = append(acked, strings.TrimSpace(out.String()))
		}
		if !processGone(info.PID) {
			t.Fatalf("daemon %d survived SIGKILL", info.PID)
		}
		s, err := layerfs.Open(context.Background(), e.store)
		if err != nil {
			t.Fatal(err)
		}
		verdict, err := s.IntegrityCheck(context.Background())
		if err != nil || verdict != "ok" {
			t.Fatalf("round %d: integrity_check: %q %v", round, verdict, err)
		}
		for _, id := range acked {
			lid, err := layerfs.ParseLayerID(id)
			if err != nil {
				t.Fatalf("acknowledged id %q: %v", id, err)
			}
			if _, err := s.Layer(context.Background(), lid); err != nil {
				t.Fatalf("round %d: acknowledged commit %s lost: %v", round, id, err)
			}
		}
		s.Close()
		info = e.mount(t)
		found := false
		for _, s := range info.StaleFixed {
			if strings.Contains(s, "stale mount") {
				found = true
			}
		}
		if !found {
			t.Fatalf("round %d: remount did not report the stale mount: %q", round, info.StaleFixed)
		}
	}
	run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
	processGone(info.PID)
	t.Logf("%d acknowledged commits survived %d kills", len(acked), rounds)
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestRemountRightAfterUnmount: when unmount returns, the Store is free:
// the runner unmounts the warm-up Workspace and mounts the timed one at
// once, and that mount must not find the Store still locked.
func TestRemountRightAfterUnmount(t *testing.T) {
	needFUSE(t)
	e := newEnv(t, "disposable")
	for i := range 5 {
		mnt := filepath.Join(e.dir, "mnt"+itoa(i))
		os.Mkdir(mnt, 0o755)
		run(t, daemonapi.ExitOK, "mount", "--store", e.store, "--workspace", mnt, "--control", e.ctl, "--fuse-transport", "dev")
		// As in the cells' warm-up: many new files for the daemon to let go of.
		for j := range 1000 {
			if err := os.WriteFile(filepath.Join(mnt, "f"+itoa(j)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
	}
}

// TestDaemonAPI is the contract the runner relies on: every command line
// daemonapi builds is one layerfsd accepts, and what layerfsd prints is
// what daemonapi's strict decoders read (a field added on one side only
// fails here).
func TestDaemonAPI(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	store, ws, ctl := filepath.Join(dir, "store"), filepath.Join(dir, "ws"), filepath.Join(dir, "ctl")
	src, scratch := filepath.Join(dir, "base"), filepath.Join(dir, "scratch")
	for _, d := range []string{ws, src, scratch} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(src, "f"), []byte("base"), 0o644)
	answer := func(c interface{ Args() []string }) []byte {
		t.Helper()
		return []byte(run(t, daemonapi.ExitOK, c.Args()...).stdout)
	}
	in, err := daemonapi.DecodeInit(answer(daemonapi.InitCmd{Store: store, Profile: daemonapi.ProfileDisposable}))
	if err != nil || in.Profile != daemonapi.ProfileDisposable || in.Schema != layerfs.SchemaVersion {
		t.Fatalf("init: %+v %v", in, err)
	}
	base, err := daemonapi.DecodeLayer(answer(daemonapi.ImportCmd{Store: store, From: src, Message: "base"}))
	if err != nil || base.Message != "base" {
		t.Fatalf("import: %+v %v", base, err)
	}
	ready, err := daemonapi.DecodeReady(answer(daemonapi.MountCmd{Store: store, OverlayDir: scratch, Workspace: ws, Control: ctl, FuseTransport: "dev"}))
	if err != nil || ready.Layer != base.ID || ready.MountNs <= 0 || ready.Features.Transport != daemonapi.TransportDev {
		t.Fatalf("mount: %+v %v", ready, err)
	}
	defer func() {
		syscall.Kill(ready.PID, syscall.SIGKILL)
		syscall.Unmount(ws, syscall.MNT_DETACH)
	}()
	// A second mount of the same Store fails: with --json its answer is
	// the failure document, which the decoder returns as an *Error.
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	r := run(t, daemonapi.ExitBusy, daemonapi.MountCmd{Store: store, Workspace: other, Control: ctl + "2"}.Args()...)
	var apiErr *daemonapi.Error
	if _, err := daemonapi.DecodeReady([]byte(r.stdout)); !errors.As(err, &apiErr) || apiErr.ExitCode != daemonapi.ExitBusy {
		t.Errorf("busy mount: decoded %v from %q", err, r.stdout)
	}
	if err := os.WriteFile(filepath.Join(ws, "g"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := daemonapi.DecodeStats(answer(daemonapi.StatsCmd{Control: ctl}))
	if err != nil || st.Requests["CREATE"].Count == 0 || st.Base != base.ID || st.TransportStats.DevRequests == 0 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	cm, err := daemonapi.DecodeCommit(answer(daemonapi.CommitCmd{Control: ctl, Message: "C01"}))
	if err != nil || cm.UpToDate || cm.Layer.Parent != base.ID || cm.Layer.Message != "C01" || cm.DurationNs <= 0 {
		t.Fatalf("commit: %+v %v", cm, err)
	}
	again, err := daemonapi.DecodeCommit(answer(daemonapi.CommitCmd{Control: ctl}))
	if err != nil || !again.UpToDate || again.Layer.ID != cm.Layer.ID {
		t.Fatalf("second commit: %+v %v", again, err)
	}
	um, err := daemonapi.DecodeUnmount(answer(daemonapi.UnmountCmd{Control: ctl}))
	if err != nil || um.DurationNs <= 0 {
		t.Fatalf("unmount: %+v %v", um, err)
	}
	processGone(ready.PID)
}

// TestUserTextIsEscaped: a Layer's message and a changed file's name are
// the user's text; log, show and diff print their control characters
// escaped, so a Store cannot move the cursor or clear the terminal of
// whoever reads it. --json keeps them as they are (JSON escapes them).
func TestUserTextIsEscaped(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	run(t, daemonapi.ExitOK, "init", "--store", store)
	a, b := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(b, "evil\x1b[2Jname"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	la := strings.TrimSpace(run(t, daemonapi.ExitOK, "import", "--store", store, "--from", a, "-m", "plain").stdout)
	lb := strings.TrimSpace(run(t, daemonapi.ExitOK, "import", "--store", store, "--from", b, "-m", "clear\x1b[2J\rmessage").stdout)
	for _, args := range [][]string{
		{"log", "--store", store},
		{"show", "--store", store, lb},
		{"diff", "--store", store, la, lb},
	} {
		out := run(t, daemonapi.ExitOK, args...).stdout
		if strings.ContainsAny(out, "\x1b\r") {
			t.Errorf("layerfsd %s printed a control character: %q", args[0], out)
		}
		if want := `\x1b[2J`; !strings.Contains(out, want) {
			t.Errorf("layerfsd %s does not show the escape as %s: %q", args[0], want, out)
		}
	}
	if out := run(t, daemonapi.ExitOK, "show", "--json", "--store", store, lb).stdout; !strings.Contains(out, `clear\u001b[2J\rmessage`) {
		t.Errorf("show --json changed the message: %s", out)
	}
}
