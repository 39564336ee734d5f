//go:build linux

package layerfs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/uring"
)

// TestFaults is the fault-injection suite, in the spirit of SQLite's crash
// tests and restic's check --read-data: each case breaks a Store or a
// write in one way and checks that nothing wrong is served, nothing is left
// behind, and the Store stays usable.
func TestFaults(t *testing.T) {
	needFUSE(t)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"killed commits", testKilledCommits},
		{"disk full/commit", func(t *testing.T) { testDiskFull(t, "commit") }},
		{"disk full/import", func(t *testing.T) { testDiskFull(t, "import") }},
		{"stopped commit", func(t *testing.T) { testStoppedCommit(t, false) }},
		{"stopped commit beside a writer", func(t *testing.T) { testStoppedCommit(t, true) }},
		{"flipped byte", func(t *testing.T) { testBadBlob(t, "flipped byte") }},
		{"deleted blob", func(t *testing.T) { testBadBlob(t, "deleted blob") }},
		{"sparse", testHolesKept},
	} {
		t.Run(tc.name, tc.run)
	}
}

const faultHelperEnv = "LAYERFS_FAULT_HELPER"

// faultHelper is the process testKilledCommits kills: it mounts a
// Workspace of the Store at LAYERFS_FAULT_STORE on LAYERFS_FAULT_MNT and
// commits rounds of changes (files new, rewritten and removed, some over a
// chunk), printing each acknowledged Layer's id, until it is killed or has
// done 20 rounds.
func faultHelper() error {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("LAYERFS_FAULT_STORE"))
	if err != nil {
		return err
	}
	mnt := os.Getenv("LAYERFS_FAULT_MNT")
	ws, err := Mount(ctx, s, mnt, MountOptions{Transport: uring.Dev, Workers: 2})
	if err != nil {
		return err
	}
	seed, _ := strconv.ParseInt(os.Getenv("LAYERFS_FAULT_SEED"), 10, 64)
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 20; round++ {
		for i := 0; i < 4; i++ {
			n := 1 + rng.Intn(64<<10)
			if rng.Intn(3) == 0 {
				n = blobChunk + rng.Intn(blobChunk)
			}
			b := make([]byte, n)
			rng.Read(b)
			p := filepath.Join(mnt, fmt.Sprintf("d%d", rng.Intn(4)), fmt.Sprintf("f%d", rng.Intn(12)))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
		os.Remove(filepath.Join(mnt, fmt.Sprintf("d%d", rng.Intn(4)), fmt.Sprintf("f%d", rng.Intn(12))))
		res, err := ws.Commit(ctx, fmt.Sprintf("seed %d round %d", seed, round))
		if err != nil {
			return err
		}
		fmt.Println(res.Layer.ID)
	}
	_, err = ws.Unmount(5 * time.Second)
	return err
}

// dying says whether the process pid was killed (SIGKILL pending) or has
// exited while some of its threads live on (its leader a zombie).
func dying(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case !ok:
		case k == "State" && strings.HasPrefix(v, "Z"):
			return true
		case k == "SigPnd" || k == "ShdPnd":
			if n, err := strconv.ParseUint(v, 16, 64); err == nil && n&(1<<(syscall.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// closeInheritedFDs marks the descriptors this process inherited without
// close-on-exec (a lock a wrapper such as flock(1) holds, say) close-on-exec,
// so that the helpers it starts, which it may kill, do not hold them.
func closeInheritedFDs() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
	}
}

// clearDeadMount detaches a killed process's mount and aborts its
// connection.
func clearDeadMount(t *testing.T, mnt string) {
	t.Helper()
	minor, ok := fuseConnection(mnt)
	if !ok {
		return
	}
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
		t.Fatalf("detaching %s: %v", mnt, err)
	}
	abortConnection(minor)
}

// testKilledCommits kills a process that commits, 50 times at random
// points: half after a random delay, half at a failpoint (a chunk hashed,
// a blob installed, the Layer's transaction about to commit) at a random
// hit. After each kill the Store must pass check (database, trees, every
// blob) and reopen with every acknowledged Layer; at the end gc must leave
// no blob that no Layer references, and the last Layer must read whole.
func testKilledCommits(t *testing.T) {
	trials := 50
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Init(ctx, dir, ProfileFast)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	closeInheritedFDs()
	t0 := time.Now()
	rng := rand.New(rand.NewSource(35))
	var acked []LayerID
	kinds := map[string]int{}
	for trial := 0; trial < trials; trial++ {
		mnt := filepath.Join(t.TempDir(), "mnt")
		os.Mkdir(mnt, 0o755)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), faultHelperEnv+"=1", "LAYERFS_FAULT_STORE="+dir, "LAYERFS_FAULT_MNT="+mnt,
			"LAYERFS_FAULT_SEED="+strconv.Itoa(trial))
		how := ""
		var delay time.Duration
		if trial%2 == 0 {
			delay = time.Duration(rng.Intn(80)) * time.Millisecond
			how = "delay"
		} else {
			point := []string{"hash-chunk", "blob-installed", "layer-tx"}[rng.Intn(3)]
			how = fmt.Sprintf("%s=kill:%d", point, 1+rng.Intn(6))
			cmd.Env = append(cmd.Env, "LAYERFS_FAILPOINTS="+how)
			how = point
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan []string, 1)
		go func() {
			var ls []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				ls = append(ls, sc.Text())
			}
			lines <- ls
		}()
		if delay > 0 {
			time.Sleep(delay)
			cmd.Process.Kill()
		}
		// A process killed while one of its threads waits on its own
		// Workspace never finishes dying: that thread waits for an
		// answer only the dead threads could give, and the FUSE device
		// stays open while it waits. Aborting the connection frees it.
		var ids []string
		for done := false; !done; {
			select {
			case ids = <-lines:
				done = true
			case <-time.After(20 * time.Millisecond):
				if dying(cmd.Process.Pid) {
					if minor, ok := fuseConnection(mnt); ok {
						abortConnection(minor)
					}
				}
			}
		}
		werr := cmd.Wait()
		var ee *exec.ExitError
		killed := errors.As(werr, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if werr != nil && !killed {
			t.Fatalf("trial %d: the committing process failed by itself: %v\n%s", trial, werr, stderr.String())
		}
		if killed {
			kinds[how]++
		}
		clearDeadMount(t, mnt)
		for _, line := range ids {
			id, err := ParseLayerID(line)
			if err != nil {
				t.Fatalf("trial %d: acknowledged id %q: %v", trial, line, err)
			}
			acked = append(acked, id)
		}
		res, err := Check(ctx, dir, CheckFull, true)
		if err != nil || !res.OK {
			t.Fatalf("trial %d (killed at %s): check: %v %+v", trial, how, err, res)
		}
		s, err := Open(ctx, dir)
		if err != nil {
			t.Fatalf("trial %d: reopening: %v", trial, err)
		}
		for _, id := range acked {
			if _, err := s.Layer(ctx, id); err != nil {
				t.Fatalf("trial %d (killed at %s): acknowledged layer %s lost: %v", trial, how, id.Short(), err)
			}
		}
		s.Close()
	}
	t.Logf("%d trials in %v, %d acknowledged commits; kills by %v", trials, time.Since(t0).Round(time.Millisecond), len(acked), kinds)
	if len(acked) == 0 {
		t.Fatal("no commit was ever acknowledged: the trials killed too early to test anything")
	}
	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gc, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refs, _, _, err := s.referencedBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := blobFiles(t, s)
	if len(files) != len(refs) {
		t.Errorf("after gc (%+v): %d blob files, %d referenced", gc, len(files), len(refs))
	}
	if res, err := Check(ctx, dir, CheckFull, true); err != nil || !res.OK {
		t.Fatalf("after gc: check: %v %+v", err, res)
	}
	last, err := s.Layer(ctx, acked[len(acked)-1])
	if err != nil {
		t.Fatal(err)
	}
	ws := mountWS(t, s, last)
	n := 0
	filepath.Walk(ws.Mountpoint(), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Errorf("walking the last layer: %v", err)
			return nil
		}
		if fi.Mode().IsRegular() {
			if _, err := os.ReadFile(p); err != nil {
				t.Errorf("reading %s: %v", p, err)
			}
			n++
		}
		return nil
	})
	t.Logf("gc freed %+v; the last acknowledged layer reads whole: %d files", gc, n)
}

// blobFiles lists the blob files on disk.
func blobFiles(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	ms, _ := filepath.Glob(filepath.Join(s.dir, blobsDir, "*", "*"))
	for _, m := range ms {
		out = append(out, filepath.Base(m))
	}
	return out
}

// smallTmpfs mounts a tmpfs of size bytes for the test.
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	os.Mkdir(dir, 0o755)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		testenv.Skip(t, "mounting a small tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// usedBytes is what the filesystem at dir has in use.
func usedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// testDiskFull fills the Store's disk (a 24 MiB tmpfs) during a commit (of
// an overlay on another disk, so the data is copied) or an import: the
// write must fail, the Store's disk must hold what it held before, the
// Workspace must keep its files, and the Store must mount again and pass
// check.
func testDiskFull(t *testing.T, what string) {
	ctx := context.Background()
	small := smallTmpfs(t, 24<<20)
	dir := filepath.Join(small, "store")
	s, err := Init(ctx, dir, ProfileFast)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "base"), []byte("base\n"), 0o644)
	l, err := s.Import(ctx, base, ImportOptions{Message: "base"})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	data := map[string][]byte{}
	for i := 0; i < 4; i++ {
		b := make([]byte, 8<<20)
		rng.Read(b)
		data[fmt.Sprintf("big%d", i)] = b
	}
	writeAll := func(dir string) {
		for name, b := range data {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var before int64
	var werr error
	switch what {
	case "commit":
		ws := mountWSOpts(t, s, MountOptions{Layer: l, OverlayDir: t.TempDir()})
		writeAll(ws.Mountpoint())
		before = usedBytes(t, small)
		_, werr = ws.Commit(ctx, "too big")
		for name, b := range data {
			if got, err := os.ReadFile(filepath.Join(ws.Mountpoint(), name)); err != nil || !bytes.Equal(got, b) {
				t.Errorf("after the failed commit, %s differs (%v)", name, err)
			}
		}
		if _, err := ws.Unmount(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	case "import":
		src := t.TempDir()
		writeAll(src)
		before = usedBytes(t, small)
		_, werr = s.Import(ctx, src, ImportOptions{Message: "too big"})
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("%s onto a full disk: %v, want ENOSPC", what, werr)
	}
	if after := usedBytes(t, small); after != before {
		t.Errorf("the Store's disk holds %d bytes after the failed %s, %d before: it left what it wrote (%v)", after, what, before, werr)
	}
	if res, err := Check(ctx, dir, CheckFull, true); err != nil || !res.OK {
		t.Fatalf("check: %v %+v", err, res)
	}
	ws := mountWSOpts(t, s, MountOptions{Layer: l})
	if b, err := os.ReadFile(filepath.Join(ws.Mountpoint(), "base")); err != nil || string(b) != "base\n" {
		t.Errorf("the Store mounted again, but reads %q %v", b, err)
	}
}

// testBadBlob damages the blob of a file: every reader gets EIO (not the
// damaged bytes, not ENOENT), a copy-up too, CheckBlobs names the blob with
// its Layer and paths, and a good file beside it reads.
func testBadBlob(t *testing.T, fault string) {
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	src := t.TempDir()
	big := make([]byte, 3*blobChunk+17) // a chunked digest
	rand.New(rand.NewSource(9)).Read(big)
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "big"), big, 0o644)
	os.WriteFile(filepath.Join(src, "sub", "same"), big, 0o644)
	os.WriteFile(filepath.Join(src, "good"), []byte("good\n"), 0o644)
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ents, err := s.loadTree(ctx, l.Root.Content)
	if err != nil {
		t.Fatal(err)
	}
	var d Digest
	for _, e := range ents {
		if e.Name == "big" {
			d = e.Content
		}
	}
	p := s.blobPath(d)
	switch fault {
	case "flipped byte":
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := []byte{0}
		f.ReadAt(b, 2*blobChunk+5)
		b[0] ^= 1
		f.WriteAt(b, 2*blobChunk+5)
		f.Close()
	case "deleted blob":
		os.Remove(p)
	}
	bc, err := s.CheckBlobs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(bc.Bad) != 1 || bc.Bad[0].Digest != d.String() || len(bc.Bad[0].Layers) != 1 || bc.Bad[0].Layers[0] != l.ID.String() ||
		strings.Join(bc.Bad[0].Paths, " ") != "/big /sub/same" {
		t.Errorf("CheckBlobs found %+v, want blob %s of layer %s at /big and /sub/same", bc.Bad, d.Short(), l.ID.Short())
	}
	ws := mountWS(t, s, l)
	for _, name := range []string{"big", "sub/same"} {
		if _, err := os.ReadFile(filepath.Join(ws.Mountpoint(), name)); !errors.Is(err, syscall.EIO) {
			t.Errorf("reading %s: %v, want EIO", name, err)
		}
	}
	if _, err := os.OpenFile(filepath.Join(ws.Mountpoint(), "big"), os.O_WRONLY, 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("opening big to write (a lazy copy-up): %v, want EIO", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Mountpoint(), "good")); err != nil || string(b) != "good\n" {
		t.Errorf("good: %q %v", b, err)
	}
}

// TestGC: gc removes a killed writer's leftovers (a blob file and a row
// no Layer references, a temporary file) and says what it freed; it keeps
// every referenced blob, so a Workspace mounted meanwhile still reads; and
// it waits for a running writer (gc.lock) rather than run beside it.
func TestGC(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	s := newStore(t, ProfileFast)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "kept"), []byte("kept\n"), 0o644)
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What a killed import leaves.
	junk := bytes.Repeat([]byte("junk"), 1<<16)
	jd := Digest(sha256.Sum256(junk))
	os.WriteFile(s.blobPath(jd), junk, 0o444)
	s.stampWritten(ctx, []Digest{jd})
	orphan := Digest(sha256.Sum256([]byte("orphan row")))
	if _, err := s.db.Exec("INSERT INTO blobs(digest, size) VALUES (?, 10)", orphan[:]); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.dir, tmpDir, "blob-12345"), junk, 0o600)

	// A writer holds gc.lock shared: gc waits for it.
	w, err := s.lockGC(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.GC(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("gc beside a writer: %v, want it to wait", err)
	}
	if _, err := os.Stat(s.blobPath(jd)); err != nil {
		t.Errorf("gc removed a blob while a writer ran: %v", err)
	}
	w.unlock()

	ws := mountWS(t, s, l)
	res, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blobs != 1 || res.BlobRows != 1 || res.TempFiles != 1 || res.Bytes < int64(2*len(junk)) {
		t.Errorf("gc: %+v, want 1 blob, 1 row, 1 temporary file and at least %d bytes", res, 2*len(junk))
	}
	if _, err := os.Stat(s.blobPath(jd)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unreferenced blob is still there: %v", err)
	}
	if stamped, err := s.stampedBlobs(ctx); err != nil || len(stamped) != 1 {
		t.Errorf("stamps after gc: %v %v, want the kept blob's only", stamped, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Mountpoint(), "kept")); err != nil || string(b) != "kept\n" {
		t.Errorf("the mounted Workspace after gc: %q %v", b, err)
	}
	if c, err := Check(ctx, s.dir, CheckFull, true); err != nil || !c.OK {
		t.Errorf("check after gc: %v %+v", err, c)
	}
	if res, err := s.GC(ctx); err != nil || res.Blobs+res.BlobRows+res.Trees+res.TempFiles != 0 {
		t.Errorf("a second gc: %+v %v, want nothing to do", res, err)
	}
}

// testStoppedCommit stops a Commit (its context canceled) right after it
// moved the first data file into the blobs: the Commit fails, every file
// of the Workspace reads as before, and the blob goes; beside another
// writer (gc.lock held shared) the blob stays for gc, the file comes back
// as a copy, and gc then removes the blob without touching the file. The
// next Commit stores it all.
func testStoppedCommit(t *testing.T, besideWriter bool) {
	s := newStore(t, ProfileFast)
	ws := mountWS(t, s, nil)
	files := map[string][]byte{}
	for i := 0; i < 3; i++ {
		b := bytes.Repeat([]byte{byte('a' + i)}, 100<<10+i)
		files[fmt.Sprintf("f%d", i)] = b
		if err := os.WriteFile(filepath.Join(ws.Mountpoint(), fmt.Sprintf("f%d", i)), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func(when string) {
		t.Helper()
		for name, b := range files {
			p := filepath.Join(ws.Mountpoint(), name)
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s: %s differs (%v)", when, name, err)
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("%s: %s: %v %v", when, name, fi.Mode(), err)
			}
		}
	}
	before := len(blobFiles(t, s))
	var writer *storeLock
	if besideWriter {
		var err error
		if writer, err = s.lockGC(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	failpointFuncs["blob-installed"] = cancel
	_, err := ws.Commit(ctx, "stopped")
	delete(failpointFuncs, "blob-installed")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped Commit: %v, want context.Canceled", err)
	}
	readAll("after the stopped Commit")
	left := len(blobFiles(t, s)) - before
	switch {
	case !besideWriter && left != 0:
		t.Errorf("the stopped Commit left %d blobs", left)
	case besideWriter && (left != 1 || !strings.Contains(err.Error(), "layerfsd gc")):
		t.Errorf("beside a writer, the stopped Commit left %d blobs (want 1, for gc) and said %q", left, err)
	}
	if besideWriter {
		writer.unlock()
		gc, err := s.GC(context.Background())
		if err != nil || gc.Blobs != 1 {
			t.Errorf("gc after the writer: %+v %v, want the one blob left", gc, err)
		}
		readAll("after gc")
	}
	res, err := ws.Commit(context.Background(), "whole")
	if err != nil {
		t.Fatal(err)
	}
	readAll("after the next Commit")
	if res.UpToDate {
		t.Errorf("the next Commit found nothing to store")
	}
}
