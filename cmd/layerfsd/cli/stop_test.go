//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// blobCount counts the Store's blob files.
func blobCount(t *testing.T, store string) int {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(store, "blobs", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

func layerCount(t *testing.T, store string) int {
	t.Helper()
	var ls []daemonapi.Layer
	if err := json.Unmarshal([]byte(run(t, daemonapi.ExitOK, "log", "--store", store, "--json").stdout), &ls); err != nil {
		t.Fatal(err)
	}
	return len(ls)
}

// TestSigtermMidCommit: SIGTERM to the daemon during a long Commit (every
// chunk hashed made slow by a failpoint) stops the Commit, which is not
// acknowledged and leaves no blob behind; the daemon unmounts and exits;
// check is clean and the Store mounts again.
func TestSigtermMidCommit(t *testing.T) {
	needFUSE(t)
	e := newEnv(t, "fast")
	slow := []string{"LAYERFS_FAILPOINTS=hash-chunk=sleep:100ms"}
	r := layerfsdEnv(t, slow, daemonapi.MountCmd{Store: e.store, Workspace: e.mnt, Control: e.ctl, FuseTransport: "dev"}.Args()...)
	expect(t, r, daemonapi.ExitOK, "mount")
	info, err := daemonapi.DecodeReady([]byte(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 48<<20) // 48 chunks: 4.8 s of hashing
	rand.New(rand.NewSource(1)).Read(b)
	if err := os.WriteFile(filepath.Join(e.mnt, "big"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	blobs, layers := blobCount(t, e.store), layerCount(t, e.store)
	commit := exec.Command(os.Args[0], "commit", "--control", e.ctl, "-m", "stopped")
	commit.Env = append(os.Environ(), "LAYERFSD_TEST_MAIN=1")
	var out bytes.Buffer
	commit.Stdout, commit.Stderr = &out, &out
	if err := commit.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // into the hashing
	syscall.Kill(info.PID, syscall.SIGTERM)
	if !processGone(info.PID) {
		t.Fatalf("daemon %d still runs after SIGTERM", info.PID)
	}
	if err := commit.Wait(); err == nil {
		t.Errorf("the Commit was acknowledged though the daemon was stopped in it: %s", out.String())
	}
	if mountinfo.IsMountpoint(e.mnt) {
		t.Errorf("the Workspace is still mounted after the daemon stopped")
	}
	run(t, daemonapi.ExitOK, "check", "--store", e.store)
	if n := blobCount(t, e.store); n != blobs {
		t.Errorf("%d blob files after the stopped Commit, %d before", n, blobs)
	}
	if n := layerCount(t, e.store); n != layers {
		t.Errorf("%d layers after the stopped Commit, %d before", n, layers)
	}
	e.mount(t)
	run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
}

// TestUnmountDeadDaemon: after kill -9 of the daemon, unmount without a
// way to find the mount says how (exit 6, a hint); given the Store or the
// Workspace it clears the dead mount (lazily, its connection aborted) and
// exits 0, and the Store mounts again.
func TestUnmountDeadDaemon(t *testing.T) {
	needFUSE(t)
	for _, by := range []string{"--store", "--workspace"} {
		t.Run(by, func(t *testing.T) {
			e := newEnv(t, "fast")
			info := e.mount(t)
			os.WriteFile(filepath.Join(e.mnt, "f"), []byte("x"), 0o644)
			syscall.Kill(info.PID, syscall.SIGKILL)
			if !processGone(info.PID) {
				t.Fatalf("daemon %d survived SIGKILL", info.PID)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(e.mnt, &st); err != unix.ENOTCONN && err != unix.ECONNABORTED {
				t.Fatalf("statfs of the dead mount: %v, want ENOTCONN", err)
			}
			r := run(t, daemonapi.ExitNoAnswer, "unmount", "--control", e.ctl)
			if !strings.Contains(r.stderr, "--workspace or --store") {
				t.Errorf("unmount of a dead daemon gives no hint: %s", r.stderr)
			}
			arg := e.store
			if by == "--workspace" {
				arg = e.mnt
			}
			r = run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl, by, arg)
			if !strings.Contains(r.stdout, "stale mount") {
				t.Errorf("unmount does not say what it cleared: %s", r.stdout)
			}
			if mountinfo.IsMountpoint(e.mnt) {
				t.Fatalf("%s is still a mount point", e.mnt)
			}
			if err := unix.Statfs(e.mnt, &st); err != nil {
				t.Errorf("statfs of the cleared mount point: %v", err)
			}
			if _, err := os.Lstat(e.ctl); err == nil {
				t.Errorf("the dead daemon's control socket is still there")
			}
			run(t, daemonapi.ExitOK, "check", "--store", e.store)
			e.mount(t)
			run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
		})
	}
}

// TestRefusedEarly: a Workspace inside what the daemon itself uses (the
// Store, the overlay directory), a Store inside the Workspace, and an
// --overlay-dir that does not exist or is a file are usage errors (exit 2)
// with a hint, refused before anything starts.
func TestRefusedEarly(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	run(t, daemonapi.ExitOK, "init", "--store", store, "--profile", "fast")
	overlay := filepath.Join(dir, "overlay")
	inStore := filepath.Join(store, "overlay", "ws")
	inOverlay := filepath.Join(overlay, "ws")
	ws := filepath.Join(dir, "ws")
	link := filepath.Join(dir, "link")
	file := filepath.Join(dir, "file")
	for _, d := range []string{inStore, inOverlay, ws} {
		os.MkdirAll(d, 0o755)
	}
	os.Symlink(filepath.Join(store, "overlay"), link)
	os.WriteFile(file, nil, 0o644)
	os.MkdirAll(filepath.Join(ws, "store2"), 0o755)
	ctl := filepath.Join(dir, "ctl.sock")
	for _, tc := range []struct {
		name string
		args []string
		hint []string
	}{
		{"workspace in the store", []string{"--store", store, "--workspace", inStore}, []string{"inside --store", "outside it"}},
		{"workspace in the store by a link", []string{"--store", store, "--workspace", filepath.Join(link, "ws")}, []string{"inside --store"}},
		{"workspace in the overlay dir", []string{"--store", store, "--workspace", inOverlay, "--overlay-dir", overlay}, []string{"inside --overlay-dir", "outside it"}},
		{"store in the workspace", []string{"--store", filepath.Join(ws, "store2"), "--workspace", ws}, []string{"--store", "inside --workspace"}},
		{"missing overlay dir", []string{"--store", store, "--workspace", ws, "--overlay-dir", filepath.Join(dir, "nope")}, []string{"does not exist", "mkdir -p"}},
		{"overlay dir a file", []string{"--store", store, "--workspace", ws, "--overlay-dir", file}, []string{"not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testenv.Snapshot(t, dir)
			args := append([]string{"mount", "--control", ctl, "--fuse-transport", "dev", "--ready-timeout", "20s"}, tc.args...)
			r := layerfsd(t, args...)
			if r.code != daemonapi.ExitUsage {
				t.Errorf("exit %d, want %d (usage); stderr %s", r.code, daemonapi.ExitUsage, r.stderr)
				syscall.Unmount(inStore, syscall.MNT_DETACH)
				syscall.Unmount(inOverlay, syscall.MNT_DETACH)
			}
			for _, h := range tc.hint {
				if !strings.Contains(r.stderr, h) {
					t.Errorf("stderr %q does not say %q", r.stderr, h)
				}
			}
			if d := testenv.SnapshotDiff(before, testenv.Snapshot(t, dir)); len(d) > 0 {
				t.Errorf("refused, yet changed: %v", d)
			}
		})
	}
}

// TestGCCommand: gc prints what it freed, and is a usage error without a Store.
func TestGCCommand(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	run(t, daemonapi.ExitOK, "init", "--store", store, "--profile", "fast")
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("f"), 0o644)
	run(t, daemonapi.ExitOK, "import", "--store", store, "--from", src)
	os.WriteFile(filepath.Join(store, "blobs", "ab", strings.Repeat("ab", 32)), []byte("left by a killed import"), 0o444)
	var res daemonapi.GCResult
	if err := json.Unmarshal([]byte(run(t, daemonapi.ExitOK, "gc", "--store", store, "--json").stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Blobs != 1 || res.Bytes == 0 {
		t.Errorf("gc: %+v, want one blob freed", res)
	}
	if r := run(t, daemonapi.ExitOK, "gc", "--store", store); !strings.Contains(r.stdout, "freed 0.0 MiB: 0 blob files") {
		t.Errorf("a second gc: %s", r.stdout)
	}
	run(t, daemonapi.ExitUsage, "gc")
	run(t, daemonapi.ExitOK, "check", "--store", store)
}

// TestSigtermMidImport: SIGTERM during a long import (every chunk hashed
// made slow by a failpoint) stops it: it fails, and leaves no blob, no
// temporary file and no Layer; check is clean.
func TestSigtermMidImport(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	run(t, daemonapi.ExitOK, "init", "--store", store, "--profile", "fast")
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	for _, name := range []string{"a", "b"} {
		b := make([]byte, 24<<20)
		rand.New(rand.NewSource(int64(len(name)))).Read(b)
		b[0] = name[0]
		os.WriteFile(filepath.Join(src, name), b, 0o644)
	}
	os.WriteFile(filepath.Join(src, "small"), []byte("small"), 0o644)
	cmd := exec.Command(os.Args[0], "import", "--store", store, "--from", src)
	cmd.Env = append(os.Environ(), "LAYERFSD_TEST_MAIN=1", "LAYERFS_FAILPOINTS=hash-chunk=sleep:200ms")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // into the hashing
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the import finished though it was stopped: %s", out.String())
	}
	if n := blobCount(t, store); n != 0 {
		t.Errorf("%d blob files after the stopped import, want none", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(store, "tmp")); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
	if n := layerCount(t, store); n != 0 {
		t.Errorf("%d layers after the stopped import", n)
	}
	run(t, daemonapi.ExitOK, "check", "--store", store)
}
