//go:build linux

package layerfs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/uring"
)

// The suite runs on both transports, each test naming the one it wants:
// subtests "dev" (/dev/fuse) and "uring" (FUSE over io_uring). On io_uring:
// posixtest, the model test, fio, passthrough and the kill test; the
// rest (stress-ng, the comparisons with the kernel, the benchmarks' counts)
// stays on /dev/fuse, whose request path is the same file system code.
var transports = []uring.Transport{uring.Dev, uring.URing}

// forTransports runs f as one subtest per transport.
func forTransports(t *testing.T, f func(t *testing.T, tr uring.Transport)) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			if tr == uring.URing {
				needURing(t)
			}
			f(t, tr)
		})
	}
}

// uringParam is this package's one hold on enable_uring: the first test
// that wants io_uring holds it on (testenv.HoldFUSEURing, until the
// package's tests end), and runTests lets go, which puts it back as it
// was unless a sealbench run still relies on it.
var uringParam struct {
	once    sync.Once
	err     error
	release func() error
}

// needURing skips (fails in CI) unless mounts can be served over io_uring,
// turning enable_uring on for the rest of the package's run if it is off.
func needURing(t testing.TB) {
	t.Helper()
	needFUSE(t)
	if err := uringAvailable(); err != nil {
		testenv.Skip(t, "FUSE over io_uring: %v", err)
	}
}

// uringAvailable is needURing's work: nil once enable_uring is on for the
// package's run, or why it cannot be.
func uringAvailable() error {
	p := &uringParam
	p.once.Do(func() {
		if _, p.err = uring.Enabled(); p.err != nil {
			return
		}
		if p.release, p.err = testenv.HoldFUSEURing(); p.err == nil {
			p.err = uring.Available()
		}
	})
	return p.err
}

// serveEnv makes the test binary a layerfsd daemon (TestKillDaemon): it
// serves the ServeConfig in the variable, prints its ReadyInfo and serves
// until killed.
const serveEnv = "LAYERFS_TEST_SERVE"

// runTests is TestMain's m.Run: it also puts enable_uring back as it was,
// and makes the binary the daemon serveEnv asks for.
func runTests(m *testing.M) int {
	if cfg := os.Getenv(serveEnv); cfg != "" {
		return serveForTest(cfg)
	}
	code := m.Run()
	if p := &uringParam; p.release != nil {
		if err := p.release(); err != nil {
			fmt.Fprintf(os.Stderr, "restoring %s: %v\n", uring.ParamPath, err)
			code = 1
		}
	}
	return code
}

func serveForTest(cfgJSON string) int {
	var cfg ServeConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Serve(ctx, cfg, func(info ReadyInfo) {
		b, _ := json.Marshal(info)
		os.Stdout.Write(append(b, '\n'))
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestKillDaemon kills the daemon with SIGKILL while a process creates
// files on its Workspace, on each transport: the process must get an error
// (the kernel aborts the connection), not hang, and the next daemon must
// find the dead mount, detach it and say so, from the mount alone (the
// dead daemon's mount record is removed first: the record's path is the
// same on both transports, and cli's TestCrash covers it).
//
// The kernel fails requests differently on the two: over /dev/fuse the
// connection ends when the daemon's descriptor closes (ENOTCONN); over
// io_uring a request in flight on a ring is cancelled (ECANCELED) and the
// connection is aborted (ECONNABORTED).
//
// Killed idle, the dead mount's root still answers stat from the
// attributes the kernel cached; the next daemon must find it dead all the
// same (CI found a next daemon that trusted stat and refused the mount).
func TestKillDaemon(t *testing.T) {
	needFUSE(t)
	forTransports(t, func(t *testing.T, tr uring.Transport) {
		t.Run("busy", func(t *testing.T) { testKillDaemon(t, tr, true) })
		t.Run("idle", func(t *testing.T) { testKillDaemon(t, tr, false) })
	})
}

func testKillDaemon(t *testing.T, tr uring.Transport, busy bool) {
	dir := t.TempDir()
	s := newStore(t, ProfileFast)
	s.Close()
	cfg := ServeConfig{Store: s.dir, Workspace: filepath.Join(dir, "ws"), Control: filepath.Join(dir, "ctl"),
		Mount: MountOptions{Transport: tr}}
	if err := os.Mkdir(cfg.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"="+string(b))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		unmount(cfg.Workspace, syscall.MNT_DETACH)
	})
	var info ReadyInfo
	if err := json.NewDecoder(out).Decode(&info); err != nil {
		t.Fatalf("reading the daemon's ReadyInfo: %v", err)
	}
	if info.Features.Transport != string(tr) {
		t.Fatalf("daemon serves over %q (%s), want %s", info.Features.Transport, info.Features.TransportReason, tr)
	}

	// A writer that keeps requests in flight until the kill; idle, a
	// stat that the kernel answers from its cache afterwards.
	failed := make(chan error, 1)
	var st syscall.Stat_t
	if !busy {
		if err := syscall.Stat(cfg.Workspace, &st); err != nil {
			t.Fatal(err)
		}
	} else {
		go func() {
			for i := 0; ; i++ {
				p := filepath.Join(cfg.Workspace, fmt.Sprintf("f%d", i))
				if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
					failed <- err
					return
				}
			}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if busy {
		select {
		case err := <-failed:
			if !isDeadMount(err) {
				t.Errorf("a write on the killed daemon's mount failed with %v, want ENOTCONN, ECONNABORTED or ECANCELED", err)
			} else {
				t.Logf("the write in flight: %v", err)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("a write on the killed daemon's mount hangs")
		}
	} else {
		t.Logf("stat of the dead mount's root: %v", syscall.Stat(cfg.Workspace, &st))
	}
	if err := probeMount(cfg.Workspace); !isDeadMount(err) {
		t.Errorf("statfs of the dead mount: %v, want ENOTCONN, ECONNABORTED or ECANCELED", err)
	}
	if err := os.Remove(filepath.Join(s.dir, mountInfoNam)); err != nil {
		t.Fatal(err)
	}

	// The next daemon cleans up what this one left.
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	ready := make(chan ReadyInfo, 1)
	go func() { served <- Serve(ctx, cfg, func(i ReadyInfo) { ready <- i }) }()
	select {
	case info = <-ready:
	case err := <-served:
		t.Fatalf("serving after the kill: %v", err)
	}
	if !strings.Contains(strings.Join(info.StaleFixed, "\n"), "stale mount") {
		t.Errorf("the next daemon did not report the dead mount: %q", info.StaleFixed)
	}
	if err := os.WriteFile(filepath.Join(cfg.Workspace, "after"), []byte("y"), 0o644); err != nil {
		t.Errorf("the next mount does not work: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if mountinfo.IsMountpoint(cfg.Workspace) {
		t.Errorf("%s still mounted after the daemons", cfg.Workspace)
	}
}

// TestUnmountWithOpenFile: on each transport, a file still open does not
// make Unmount hang: it waits its bounded time, detaches the mount, aborts
// the connection (the open file then fails instead of hanging), and the
// serve loops end.
func TestUnmountWithOpenFile(t *testing.T) {
	needFUSE(t)
	forTransports(t, func(t *testing.T, tr uring.Transport) {
		s := newStore(t, ProfileDisposable)
		ws := mountWSOpts(t, s, MountOptions{Transport: tr})
		f, err := os.Create(filepath.Join(ws.Mountpoint(), "open"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		res, err := ws.Unmount(200 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Lazy {
			t.Errorf("unmount with an open file was not lazy: %+v", res)
		}
		if _, err := f.WriteString("x"); err == nil {
			// Passthrough writes go to the data file, which is gone
			// with the overlay but still open: the kernel then asks
			// nothing of the daemon. A FLUSH does.
			if err := f.Sync(); err == nil {
				if err := f.Close(); err == nil {
					t.Errorf("the open file still works after its connection was aborted")
				}
			}
		}
		if mountinfo.IsMountpoint(ws.Mountpoint()) {
			t.Errorf("%s still mounted", ws.Mountpoint())
		}
	})
}
