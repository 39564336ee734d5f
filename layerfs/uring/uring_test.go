//go:build linux

package uring

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/posixtest"
	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
)

// serverEnv makes the test binary a daemon for TestURing/Kill and NoPoll:
// it mounts a loopback whose LOOKUP of "block" never returns, at the
// directory the variable names, over the transport in serverTransportEnv;
// with serverModeEnv=nopoll it then uses the mount itself and exits. The
// loopback's backing directory is serverSourceEnv's, which the test makes
// and removes: the daemon is killed, so it could not remove its own.
const (
	serverEnv          = "SEALBENCH_URING_TEST_SERVER"
	serverTransportEnv = "SEALBENCH_URING_TEST_TRANSPORT"
	serverModeEnv      = "SEALBENCH_URING_TEST_MODE"
	serverSourceEnv    = "SEALBENCH_URING_TEST_SOURCE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(serverEnv); dir != "" {
		os.Exit(runServer(dir, os.Getenv(serverSourceEnv), Transport(os.Getenv(serverTransportEnv))))
	}
	os.Exit(m.Run())
}

// options are the kernel settings of a LayerFS Workspace (layerfs's
// kernelOptions), so that what is measured here is what a Workspace gets.
func options() *fs.Options {
	timeout := time.Hour
	o := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:           "loopback",
			Name:             "loopback",
			MaxWrite:         1 << 20,
			MaxReadAhead:     1 << 20,
			DirectMount:      true,
			DirectMountFlags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOATIME,
			EnableLocks:      true,
			Options:          []string{"default_permissions"},
			MaxStackDepth:    2,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
	}
	o.AllowOther = os.Geteuid() == 0
	o.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
	return o
}

// mountLoopback mounts go-fuse's loopback of src at mnt over transport t.
func mountLoopback(tb testing.TB, src, mnt string, t Transport) *Server {
	tb.Helper()
	return mountLoopbackOpts(tb, src, mnt, Options{Transport: t})
}

func mountLoopbackOpts(tb testing.TB, src, mnt string, opts Options) *Server {
	tb.Helper()
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		tb.Fatal(err)
	}
	o := options()
	s, err := Mount(mnt, fs.NewNodeFS(root, o), &o.MountOptions, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if isMounted(mnt) {
			if err := s.Unmount(); err != nil {
				tb.Errorf("unmounting %s: %v", mnt, err)
			}
		}
	})
	return s
}

// isMounted says whether dir is a mount point in /proc/self/mountinfo.
func isMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// withURingEnabled turns enable_uring on for the rest of tb and puts it back
// as it was when tb ends, failed or not. Only TestURing (and the benchmark)
// calls it. It holds testenv.ExclusiveFUSEURing meanwhile, so that neither
// another package's tests (layerfs's run on io_uring too) nor a sealbench
// run on this machine see the parameter change under them, or put it back
// under this one.
func withURingEnabled(tb testing.TB) {
	tb.Helper()
	testenv.NeedRoot(tb)
	testenv.NeedFUSE(tb)
	unlock, err := testenv.ExclusiveFUSEURing(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	was, err := SetEnabled(true)
	if err != nil {
		unlock()
		testenv.Skip(tb, "FUSE over io_uring: %v", err)
	}
	tb.Cleanup(func() {
		defer unlock()
		if _, err := SetEnabled(was); err != nil {
			tb.Errorf("restoring %s: %v", ParamPath, err)
		}
	})
}

// TestURing is the package's one test that touches enable_uring: it turns
// it off for the fallback, then on for everything else, and restores it.
func TestURing(t *testing.T) {
	withURingEnabled(t)

	t.Run("Fallback", func(t *testing.T) {
		if _, err := SetEnabled(false); err != nil {
			t.Fatal(err)
		}
		defer SetEnabled(true)
		if err := Available(); !errors.Is(err, ErrNotNegotiated) {
			t.Fatalf("Available with enable_uring off: %v, want ErrNotNegotiated", err)
		}
		src, mnt := t.TempDir(), t.TempDir()
		s := wantFallback(t, src, mnt)
		if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.DevRequests == 0 || st.RingRequests != 0 {
			t.Errorf("over /dev/fuse: %+v", st)
		}
	})

	t.Run("FailedQueue", testFailedQueue)
	t.Run("Rings", testRings)
	t.Run("Depth1", testDepth1)
	t.Run("NoPoll", testNoPoll)
	t.Run("Posix", testPosix)
	t.Run("Passthrough", testPassthrough)
	t.Run("Unmount", testUnmount)
	t.Run("Kill", testKill)
	t.Run("Interrupt", testInterrupt)
}

func TestParseTransport(t *testing.T) {
	for _, s := range []string{"auto", "uring", "dev"} {
		if tr, err := ParseTransport(s); err != nil || string(tr) != s {
			t.Errorf("ParseTransport(%q) = %q, %v", s, tr, err)
		}
	}
	for _, s := range []string{"", "io_uring", "Dev"} {
		if _, err := ParseTransport(s); err == nil {
			t.Errorf("ParseTransport(%q) succeeded", s)
		}
	}
}

func TestCountCPUs(t *testing.T) {
	for list, want := range map[string]int{"0\n": 1, "0-1\n": 2, "0-3,8-9": 6, "0,2,4": 3} {
		if n, err := countCPUs(list); err != nil || n != want {
			t.Errorf("countCPUs(%q) = %d, %v; want %d", list, n, err, want)
		}
	}
	for _, list := range []string{"", "a", "3-1", "0-"} {
		if _, err := countCPUs(list); err == nil {
			t.Errorf("countCPUs(%q) succeeded", list)
		}
	}
}

// wantFallback checks that, as things are, Mount of a loopback of src at
// mnt over URing fails with ErrNotNegotiated and leaves nothing mounted,
// and that over Auto it mounts on /dev/fuse and says why.
func wantFallback(t *testing.T, src, mnt string) *Server {
	t.Helper()
	root, _ := fs.NewLoopbackRoot(src)
	o := options()
	if s, err := Mount(mnt, fs.NewNodeFS(root, o), &o.MountOptions, Options{Transport: URing}); !errors.Is(err, ErrNotNegotiated) {
		if err == nil {
			s.Unmount()
		}
		t.Fatalf("Mount(URing): %v, want ErrNotNegotiated", err)
	} else {
		t.Logf("Mount(URing): %v", err)
	}
	if isMounted(mnt) {
		t.Fatalf("a refused Mount(URing) left %s mounted", mnt)
	}
	s := mountLoopback(t, src, mnt, Auto)
	if s.Transport() != Dev || !errors.Is(s.Reason(), ErrNotNegotiated) {
		t.Fatalf("Mount(Auto): transport %s, reason %v; want dev and why", s.Transport(), s.Reason())
	}
	return s
}

// testFailedQueue: when one queue fails to start after others registered,
// the kernel is told to give up io_uring on the connection, and the mount
// works over /dev/fuse (Auto) or is gone (URing).
func testFailedQueue(t *testing.T) {
	n, err := possibleCPUs()
	if err != nil {
		t.Fatal(err)
	}
	failQueue = n - 1
	defer func() { failQueue = -1 }()
	src, mnt := t.TempDir(), t.TempDir()
	s := wantFallback(t, src, mnt)
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("requests hang after the fallback (the kernel still waits for the rings?)")
	}
	if st := s.Stats(); st.DevRequests == 0 || st.RingRequests != 0 {
		t.Errorf("after the fallback: %+v", st)
	}
}

// onCPU runs f on a thread pinned to cpu.
func onCPU(t *testing.T, cpu int, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var set, old unix.CPUSet
		unix.SchedGetaffinity(0, &old)
		defer unix.SchedSetaffinity(0, &old)
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Errorf("pinning to CPU %d: %v", cpu, err)
			return
		}
		f()
	}()
	<-done
}

// testRings: every queue is registered and pinned, requests made on each
// CPU are served by that CPU's queue, and none comes through /dev/fuse.
func testRings(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	s := mountLoopback(t, src, mnt, URing)
	if s.Transport() != URing {
		t.Fatalf("transport %s: %v", s.Transport(), s.Reason())
	}
	ncpu, err := possibleCPUs()
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	unix.SchedGetaffinity(0, &set)
	before := s.Stats()
	if len(before.Queues) != ncpu {
		t.Fatalf("%d queues, want one per possible CPU (%d)", len(before.Queues), ncpu)
	}
	for cpu := 0; cpu < ncpu; cpu++ {
		if !set.IsSet(cpu) {
			continue
		}
		if !before.Queues[cpu].Pinned {
			t.Errorf("queue %d is not pinned to its CPU", cpu)
		}
		onCPU(t, cpu, func() {
			for i := 0; i < 20; i++ {
				p := filepath.Join(mnt, fmt.Sprintf("cpu%d-%d", cpu, i))
				if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	names, err := os.ReadDir(mnt)
	if err != nil || len(names) != 20*set.Count() {
		t.Fatalf("readdir: %d names, %v", len(names), err)
	}
	st := s.Stats()
	t.Logf("%+v", st)
	for cpu := 0; cpu < ncpu; cpu++ {
		// Each file costs at least LOOKUP, CREATE, FLUSH, RELEASE.
		if set.IsSet(cpu) && st.Queues[cpu].Requests-before.Queues[cpu].Requests < 4*20 {
			t.Errorf("queue %d served %d requests for 20 files made on its CPU", cpu, st.Queues[cpu].Requests-before.Queues[cpu].Requests)
		}
	}
	if st.DevRequests != 0 {
		t.Errorf("%d requests came through /dev/fuse", st.DevRequests)
	}
}

// testDepth1: with one entry per queue, many requests at once from every
// CPU wait in the kernel for the entry, and all are served.
func testDepth1(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	s := mountLoopbackOpts(t, src, mnt, Options{Transport: URing, QueueDepth: 1})
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				p := filepath.Join(mnt, fmt.Sprintf("g%d-%d", g, i))
				if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
					errs <- err
					return
				}
				if b, err := os.ReadFile(p); err != nil || string(b) != p {
					errs <- fmt.Errorf("reading %s: %q, %v", p, b, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 16; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if names, err := os.ReadDir(mnt); err != nil || len(names) != 16*50 {
		t.Errorf("readdir: %d names, %v", len(names), err)
	}
	if st := s.Stats(); st.DevRequests != 0 {
		t.Errorf("%d requests came through /dev/fuse", st.DevRequests)
	}
}

// testNoPoll opens files on a mount from the process that serves it while
// the garbage collector stops the world again and again. Go's netpoller
// registers each file with epoll_ctl holding its P; were FUSE_POLL still
// sent, a stop-the-world would wait for that P while the request waited for
// a queue thread waiting for the world, and the process would hang for
// good, unkillable. So the daemon is a child process, and on a hang this
// test aborts its connection through fusectl (which frees it) and fails.
func testNoPoll(t *testing.T) {
	mnt := t.TempDir()
	cmd, lines := startDaemon(t, mnt, URing, "nopoll")
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	result := make(chan string, 1)
	go func() {
		lines.Scan()
		result <- lines.Text()
	}()
	select {
	case r := <-result:
		if r != "ok" {
			t.Errorf("daemon: %q", r)
		}
	case <-time.After(testenv.Patience):
		t.Errorf("opening files on the mount from its own daemon hangs (FUSE_POLL against a stop-the-world?); aborting connection %d", unix.Minor(st.Dev))
		os.WriteFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(st.Dev)), []byte("1"), 0)
	}
	cmd.Process.Kill()
	cmd.Wait()
	unix.Unmount(mnt, unix.MNT_DETACH)
}

// testPosix runs go-fuse's POSIX suite on a loopback over io_uring, a
// fresh mount per test.
func testPosix(t *testing.T) {
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			mnt := t.TempDir()
			s := mountLoopback(t, t.TempDir(), mnt, URing)
			posixtest.All[name](t, mnt)
			if st := s.Stats(); st.DevRequests != 0 {
				t.Errorf("%d requests came through /dev/fuse", st.DevRequests)
			}
		})
	}
}

// testPassthrough: with io_uring, reads and writes of a large file still go
// straight to the backing file (the backing-file ioctls go to /dev/fuse).
func testPassthrough(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	s := mountLoopback(t, src, mnt, URing)
	if s.Fuse().KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		testenv.Skip(t, "kernel does not offer FUSE passthrough")
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	p := filepath.Join(mnt, "big")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	backing, err := os.ReadFile(filepath.Join(src, "big"))
	if err != nil || !bytes.Equal(backing, data) {
		t.Fatalf("backing file: %d bytes, %v", len(backing), err)
	}
	// Each 1 MiB READ or WRITE served would be a request: 64 MiB through
	// the daemon would be 128 of them at least.
	if st := s.Stats(); st.RingRequests > 30 || st.DevRequests != 0 {
		t.Errorf("64 MiB written and read: %+v; READ and WRITE should not reach the daemon", st)
	}
}

// testUnmount: Unmount returns, the mount is gone, every queue goroutine
// has stopped, and so has the /dev/fuse loop.
func testUnmount(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	s := mountLoopback(t, src, mnt, URing)
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := s.Unmount(); err != nil {
		t.Fatal(err)
	}
	if isMounted(mnt) {
		t.Fatalf("%s still mounted", mnt)
	}
	for _, q := range s.queues {
		select {
		case <-q.exited:
		default:
			t.Errorf("queue %d still running", q.qid)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "f")); err != nil {
		t.Error(err)
	}
}

// testKill kills the daemon with SIGKILL while a request is blocked in it,
// on each transport, and checks the same outcome: the blocked call fails,
// the mount's connection is aborted (ENOTCONN), and it unmounts cleanly.
func testKill(t *testing.T) {
	blockedErr := map[Transport]error{}
	defer func() {
		d, u := blockedErr[Dev], blockedErr[URing]
		if d != nil && u != nil && !errors.Is(u, errors.Unwrap(d)) {
			t.Errorf("the blocked call failed with %v over /dev/fuse but %v over io_uring", d, u)
		}
	}()
	for _, tr := range []Transport{Dev, URing} {
		t.Run(string(tr), func(t *testing.T) {
			mnt := t.TempDir()
			cmd, lines := startDaemon(t, mnt, tr, "")
			defer cmd.Process.Kill()
			statErr := make(chan error, 1)
			go func() {
				_, err := os.Stat(filepath.Join(mnt, "block"))
				statErr <- err
			}()
			if !lines.Scan() || lines.Text() != "blocked" {
				t.Fatalf("daemon said %q (%v), want %q", lines.Text(), lines.Err(), "blocked")
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			select {
			case err := <-statErr:
				if err == nil {
					t.Fatal("stat of the blocked name succeeded")
				}
				t.Logf("blocked stat: %v", err)
				blockedErr[tr] = err.(*os.PathError)
			case <-time.After(testenv.Patience):
				t.Fatal("the blocked stat still hangs after the daemon was killed")
			}
			if _, err := os.Stat(filepath.Join(mnt, "other")); !errors.Is(err, unix.ENOTCONN) {
				t.Errorf("stat on the dead mount: %v, want ENOTCONN", err)
			}
			if err := unix.Unmount(mnt, 0); err != nil {
				t.Fatalf("unmounting the dead mount: %v", err)
			}
			if isMounted(mnt) {
				t.Fatalf("%s still mounted", mnt)
			}
		})
	}
}

// startDaemon starts this test binary as a daemon (runServer) mounting at
// mnt, and returns once it says it has mounted over transport tr.
func startDaemon(t *testing.T, mnt string, tr Transport, mode string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd, out := testenv.StartSelf(t, serverEnv+"="+mnt, serverSourceEnv+"="+t.TempDir(), serverTransportEnv+"="+string(tr), serverModeEnv+"="+mode)
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "mounted "+string(tr) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("daemon said %q (%v), want %q", lines.Text(), lines.Err(), "mounted "+string(tr))
	}
	return cmd, lines
}

// intrFS is a loopback whose LOOKUP of "intr" waits for the request to be
// interrupted, and says so on interrupted, or gives up after 10s.
type intrFS struct {
	fuse.RawFileSystem
	blocked     chan struct{}
	interrupted chan struct{}
}

func (f *intrFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if name != "intr" {
		return f.RawFileSystem.Lookup(cancel, h, name, out)
	}
	f.blocked <- struct{}{}
	select {
	case <-cancel:
		f.interrupted <- struct{}{}
		return fuse.EINTR
	case <-time.After(testenv.Patience):
		return fuse.ENOENT
	}
}

// testInterrupt: a process waiting for a request served on a ring gets a
// signal; the kernel sends INTERRUPT on /dev/fuse, and it must reach the
// request on the ring (its cancel channel), as it does over /dev/fuse.
func testInterrupt(t *testing.T) {
	stat := testenv.NeedCommand(t, "stat")
	for _, tr := range []Transport{Dev, URing} {
		t.Run(string(tr), func(t *testing.T) {
			src, mnt := t.TempDir(), t.TempDir()
			root, _ := fs.NewLoopbackRoot(src)
			o := options()
			f := &intrFS{RawFileSystem: fs.NewNodeFS(root, o), blocked: make(chan struct{}, 1), interrupted: make(chan struct{}, 1)}
			s, err := Mount(mnt, f, &o.MountOptions, Options{Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unmount()
			if s.Transport() != tr {
				t.Fatalf("transport %s: %v", s.Transport(), s.Reason())
			}
			cmd := exec.Command(stat, filepath.Join(mnt, "intr"))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			select {
			case <-f.blocked:
			case <-time.After(testenv.Patience):
				t.Fatal("LOOKUP never came")
			}
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-f.interrupted:
			case <-time.After(testenv.Patience):
				t.Fatal("the request was not interrupted")
			}
			cmd.Wait()
		})
	}
}

// blockFS is a loopback whose LOOKUP of "block" says so and never returns.
type blockFS struct{ fuse.RawFileSystem }

func (b *blockFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if name == "block" {
		fmt.Println("blocked")
		select {}
	}
	return b.RawFileSystem.Lookup(cancel, h, name, out)
}

func runServer(dir, src string, t Transport) int {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := options()
	s, err := Mount(dir, &blockFS{fs.NewNodeFS(root, o)}, &o.MountOptions, Options{Transport: t})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("mounted", s.Transport())
	if os.Getenv(serverModeEnv) == "nopoll" {
		fmt.Println(openWhileCollecting(dir))
		return 0
	}
	s.Wait()
	return 0
}

// openWhileCollecting writes and reads files in dir while the garbage
// collector runs back to back, and says "ok" or what failed.
func openWhileCollecting(dir string) string {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	for i := 0; i < 300; i++ {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			return err.Error()
		}
		if _, err := os.ReadFile(p); err != nil {
			return err.Error()
		}
	}
	return "ok"
}
