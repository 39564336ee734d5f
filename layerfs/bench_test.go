//go:build linux

package layerfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/uring"
	"github.com/sealbench/sealbench/runner/cells"
	"golang.org/x/sys/unix"
)

// cell is one of the twelve workloads: a POSIX sh body run with the
// directory under test as its working directory, and whether it needs the
// 64 MiB base file.
type cell struct {
	name string
	body string
	base bool
}

// benchCells are the twelve cell bodies a bundle ships (runner/cells in the
// source tree), run with /bin/sh, in the runner's registry order; C09-C11
// start from the runner's 64 MiB base file.
func benchCells(b testing.TB) []cell {
	dir := filepath.Join(testenv.ModuleRoot(b), "runner", "cells")
	var cs []cell
	for _, name := range cells.Names() {
		c := cells.All[name]
		cs = append(cs, cell{name: name, body: "sh " + filepath.Join(dir, c.Body), base: c.Base != ""})
	}
	return cs
}

func runBody(b testing.TB, dir, body string) time.Duration {
	// Start every timed run from the same state: no dirty pages left by
	// the setup or an earlier run for the kernel to write back meanwhile.
	syscall.Sync()
	cmd := exec.Command("/bin/sh", "-c", body)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("cell body in %s: %v\n%s", dir, err, out)
	}
	return d
}

// baseFile writes the 64 MiB pseudo-random base file from a fixed seed.
func baseFile(b testing.TB, dir string) {
	if err := cells.WriteBase(dir); err != nil {
		b.Fatal(err)
	}
}

// systems are what the cell benchmark runs each body on, in this order
// (turned with each round): a plain directory, go-fuse's loopback of one
// and libfuse's passthrough_hp of one over each transport, and a Workspace
// over each transport.
var systems = []string{"native", "loopback/dev", "loopback/uring", "passthrough_hp/dev", "passthrough_hp/uring", "layerfs/dev", "layerfs/uring"}

// benchKnobs are the changes LAYERFS_BENCH_AB can measure against their
// absence in one run: each sets its change on or off, for the Workspaces
// of the system "layerfs-no-KNOB/TRANSPORT", which takes turns with the
// others.
var benchKnobs = map[string]func(on bool){
	"writebehind": func(on bool) { writeBehindOff = !on },
	"lazycopy": func(on bool) {
		lazyMinSize = lazyMinDefault
		if !on {
			lazyMinSize = 1 << 62 // no file is large enough: every copy-up copies first
		}
	},
}

// lazyMinDefault is lazyMinSize as the package sets it, which the
// lazycopy knob puts back.
var lazyMinDefault = lazyMinSize

// benchKnob is the knob LAYERFS_BENCH_AB names, or "" when none.
func benchKnob(b *testing.B) string {
	k := os.Getenv("LAYERFS_BENCH_AB")
	if _, ok := benchKnobs[k]; k != "" && !ok {
		b.Fatalf("LAYERFS_BENCH_AB=%s: no such knob (have %v)", k, benchKnobs)
	}
	return k
}

// mounter mounts a FUSE file system of dir at mnt over tr and returns how
// to unmount it and, where the file system counts them, its requests.
type mounter func(b *testing.B, dir, mnt string, tr uring.Transport) (unmount func(), tel *telemetry)

func loopbackMounter(b *testing.B, dir, mnt string, tr uring.Transport) (func(), *telemetry) {
	return mountLoopbackOver(b, dir, mnt, tr)
}

// passthroughHP is where libfuse's example/passthrough_hp is: the path in
// LAYERFS_BENCH_PASSTHROUGH_HP, or the one scripts/libfuse built; "" and
// why not when neither.
func passthroughHP(b *testing.B) (path, why string) {
	if p := os.Getenv("LAYERFS_BENCH_PASSTHROUGH_HP"); p != "" {
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			b.Fatalf("LAYERFS_BENCH_PASSTHROUGH_HP=%s is not an executable (%v)", p, err)
		}
		return p, ""
	}
	script := filepath.Join(testenv.ModuleRoot(b), "scripts", "libfuse")
	out, err := exec.Command(script, "path").Output()
	if p := strings.TrimSpace(string(out)); err == nil && p != "" {
		return p, ""
	}
	return "", "not built; build it with LIBFUSE_SRC=<libfuse 3.18+ source tree or git directory> scripts/libfuse, or set LAYERFS_BENCH_PASSTHROUGH_HP"
}

// hpMounter mounts libfuse's passthrough_hp (bin) of dir at mnt, in the
// foreground as a child of the test, and unmounts it and waits for it to
// exit, also when the benchmark fails. Its options are its defaults, which
// are the Workspace's kernel settings already: FUSE passthrough for READ
// and WRITE, no writeback cache (passthrough excludes it), entry, attribute
// and negative-entry timeouts of a day (the Workspace's hour is as good as
// forever for a cell), default_permissions, 1 MiB max_write, libfuse's
// multi-threaded loop with its default thread limit and one /dev/fuse
// descriptor (no --clone-fd: the Workspace reads one too). Over io_uring it
// adds -o io_uring, libfuse's switch (off by default; FUSE_URING_ENABLE=1
// is its environment equivalent): one ring per CPU of the default depth, 8,
// the same layout as layerfs/uring. Over /dev/fuse FUSE_URING_ENABLE=0 is
// set so an inherited variable cannot turn it on. Without a count of its
// requests (it keeps none) its column shows times only.
func hpMounter(bin string) mounter {
	return func(b *testing.B, dir, mnt string, tr uring.Transport) (func(), *telemetry) {
		args := []string{"--foreground"}
		env := append(os.Environ(), "FUSE_URING_ENABLE=0")
		if tr == uring.URing {
			args = append(args, "-o", "io_uring")
			env = env[:len(env)-1]
		}
		cmd := exec.Command(bin, append(args, dir, mnt)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			b.Fatalf("starting %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		unmount := func() {
			var errs []error
			if mountinfo.IsMountpoint(mnt) {
				// A busy mount (a process of the body still in
				// it) gets a few tries, then is detached.
				err := syscall.Unmount(mnt, 0)
				for i := 0; errors.Is(err, syscall.EBUSY) && i < 50; i++ {
					time.Sleep(20 * time.Millisecond)
					err = syscall.Unmount(mnt, 0)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("unmount: %w", err))
					if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
						errs = append(errs, fmt.Errorf("detach: %w", err))
					}
				}
			}
			select {
			case err := <-exited:
				if err != nil {
					errs = append(errs, fmt.Errorf("exit: %w", err))
				}
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
				errs = append(errs, errors.New("still running 5 s after its unmount: killed"))
			}
			if err := errors.Join(errs...); err != nil {
				b.Errorf("passthrough_hp of %s at %s over %s: %v\n%s", dir, mnt, tr, err, stderr.String())
			} else if bytes.Contains(stderr.Bytes(), []byte("passthrough")) {
				// It falls back to READ and WRITE through the daemon
				// when the kernel refuses passthrough, and says so.
				b.Logf("passthrough_hp over %s: %s", tr, stderr.String())
			}
		}
		// Ready once mounted and answering (the kernel holds requests
		// until INIT is answered); over io_uring, once its rings exist,
		// or the column would be /dev/fuse's under another name.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var st syscall.Stat_t
			if mountinfo.IsMountpoint(mnt) && syscall.Stat(mnt, &st) == nil &&
				(tr != uring.URing || ioURingFDs(cmd.Process.Pid) > 0) {
				break
			}
			select {
			case err := <-exited:
				exited <- err
				unmount()
				b.Fatalf("passthrough_hp of %s at %s over %s exited before it was ready: %v", dir, mnt, tr, err)
			default:
			}
			if time.Now().After(deadline) {
				unmount()
				b.Fatalf("passthrough_hp of %s at %s over %s: not ready after 10 s (io_uring fds %d)\n%s",
					dir, mnt, tr, ioURingFDs(cmd.Process.Pid), stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return unmount, nil
	}
}

// ioURingFDs counts the io_uring instances process pid holds open.
func ioURingFDs(pid int) int {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == "anon_inode:[io_uring]" {
			n++
		}
	}
	return n
}

// cellTimes is one round of one cell: the timed run's time on each system
// that ran, and the Workspaces' figures.
type cellTimes struct {
	times                  map[string]time.Duration
	requests               map[string]int64 // by system: FUSE requests of the timed run
	nativeWarm             time.Duration
	mount, unmount, commit time.Duration // layerfs/dev's
	medianNs               int64         // layerfs/dev's
	rings                  int64         // layerfs/uring's requests on the rings
}

// runPlain runs c's body in a fresh directory made in parent (with the base
// file when c needs it), directly or, when mount is set, through the file
// system it mounts of the directory at mnt over tr (go-fuse's loopback with
// the Workspace's kernel settings, or passthrough_hp), whose request counts
// it returns where it keeps them; the directory goes afterwards.
func runPlain(b *testing.B, c cell, parent, prefix, mnt string, mount mounter, tr uring.Transport) (time.Duration, *telemetry) {
	d, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		b.Fatal(err)
	}
	// The files go before the next run, as a warm-up mount's overlay goes
	// at its unmount.
	defer func() {
		if err := os.RemoveAll(d); err != nil {
			b.Fatal(err)
		}
	}()
	if c.base {
		baseFile(b, d)
	}
	if mount == nil {
		return runBody(b, d, c.body), nil
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		b.Fatal(err)
	}
	unmount, tel := mount(b, d, mnt, tr)
	defer unmount()
	return runBody(b, mnt, c.body), tel
}

// runCell runs one cell with the cache protocol: a fresh Store, an untimed
// warm-up run on an earlier mount, then a fresh mount for the timed run,
// then Commit and unmount; and the same body, also after a warm-up, on a
// plain directory of the same filesystem and through go-fuse's loopback of
// one and, when hp is set, libfuse's passthrough_hp (that binary) of one;
// each FUSE system over each transport in transports, all in the order
// round picks.
func runCell(b *testing.B, c cell, src string, round int, transports []uring.Transport, hp, knob string) cellTimes {
	ct := cellTimes{times: map[string]time.Duration{}, requests: map[string]int64{}}
	ctx := context.Background()
	root, err := os.MkdirTemp("", "layerfs-cell-")
	if err != nil {
		b.Fatal(err)
	}
	// Each cell cleans up after itself: 64 MiB files left lying around
	// make later cells slower.
	defer os.RemoveAll(root)
	s, err := Init(ctx, filepath.Join(root, "store"), ProfileDisposable)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// Native: warm-up in one directory, timed run in a fresh one, both
	// made where the Workspace's overlay directory will be made. Where a
	// directory lands decides what creating files in it costs (on this
	// machine's ext4, 30 µs in one fresh directory and 700 µs in another),
	// so the plain directory and the overlay must be neighbours for a fair
	// ratio.
	overlays := filepath.Join(s.dir, overlaysDir)
	if v := os.Getenv("LAYERFS_BENCH_OVERLAY"); v != "" {
		overlays = v
	}
	// Every Workspace mounts this Layer: the Store's newest would be the
	// first Workspace's Commit for the next one.
	l := &Layer{Root: emptyRoot()}
	if c.base {
		if l, err = s.Import(ctx, src, ImportOptions{Message: "base"}); err != nil {
			b.Fatal(err)
		}
	}
	native := func() {
		for i := 0; i < 2; i++ {
			t, _ := runPlain(b, c, overlays, "native-", "", nil, "")
			if i == 1 {
				ct.times["native"] = t
			} else {
				ct.nativeWarm = t
			}
		}
	}
	// go-fuse's own loopback filesystem over a neighbour directory, with
	// the Workspace's kernel settings: what any FUSE filesystem costs here
	// over that transport, so the ratio to it is LayerFS's own share.
	loopback := func(tr uring.Transport) func() {
		return func() {
			for i := 0; i < 2; i++ {
				mnt := filepath.Join(root, fmt.Sprintf("loopback-%s%d", tr, i))
				t, tel := runPlain(b, c, overlays, "loopback-", mnt, loopbackMounter, tr)
				if i == 1 {
					ct.times["loopback/"+string(tr)] = t
					_, all := tel.snapshot()
					ct.requests["loopback/"+string(tr)] = all.Count
				}
			}
		}
	}
	// libfuse's passthrough_hp, the C reference, the same way: the peer
	// LayerFS over io_uring is to beat.
	passthrough := func(tr uring.Transport) func() {
		return func() {
			for i := 0; i < 2; i++ {
				mnt := filepath.Join(root, fmt.Sprintf("passthrough_hp-%s%d", tr, i))
				t, _ := runPlain(b, c, overlays, "passthrough_hp-", mnt, hpMounter(hp), tr)
				if i == 1 {
					ct.times["passthrough_hp/"+string(tr)] = t
				}
			}
		}
	}
	workspace := func(tr uring.Transport, knob string) func() {
		name := "layerfs/" + string(tr)
		if knob != "" {
			name = "layerfs-no-" + knob + "/" + string(tr)
		}
		return func() {
			if knob != "" {
				benchKnobs[knob](false)
				defer benchKnobs[knob](true)
			}
			for i := 0; i < 2; i++ {
				mnt := filepath.Join(root, fmt.Sprintf("mnt-%s%d", tr, i))
				os.Mkdir(mnt, 0o755)
				ws, err := Mount(ctx, s, mnt, MountOptions{Layer: l, OverlayDir: overlays, Transport: tr})
				if err != nil {
					b.Fatal(err)
				}
				t := runBody(b, mnt, c.body)
				if i == 1 {
					ct.times[name] = t
					st, err := ws.Stats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					ct.requests[name] = st.AllRequests.Count
					if tr == uring.URing && knob == "" {
						ct.rings = st.TransportStats.RingRequests
					}
					if os.Getenv("LAYERFS_BENCH_OPS") != "" {
						b.Logf("%s on %s requests: %v", c.name, name, st.Requests)
					}
					res, err := ws.Commit(ctx, c.name)
					if err != nil {
						b.Fatal(err)
					}
					if tr == uring.Dev && knob == "" {
						ct.mount, ct.medianNs = ws.mountDur, st.AllRequests.MedianNs
						ct.commit = time.Duration(res.DurationNs)
					}
				}
				res, err := ws.Unmount(5 * time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if i == 1 && tr == uring.Dev && knob == "" {
					ct.unmount = time.Duration(res.DurationNs)
				}
			}
		}
	}
	runs := []func(){native}
	for _, tr := range transports {
		if benchSystem("loopback/" + string(tr)) {
			runs = append(runs, loopback(tr))
		}
		if benchSystem("layerfs/" + string(tr)) {
			runs = append(runs, workspace(tr, ""))
			if knob != "" {
				runs = append(runs, workspace(tr, knob))
			}
		}
		if hp != "" && benchSystem("passthrough_hp/"+string(tr)) {
			runs = append(runs, passthrough(tr))
		}
	}
	// They run in an order that turns with round: what creating a file
	// costs on this machine's ext4 also changes with what happened nearby
	// in the last minutes (after creating and deleting thousands of files
	// it went from 50 to 240 µs a minute later), so whichever always ran
	// last would pay for the others' churn.
	for i := range runs {
		runs[(i+round)%len(runs)]()
	}
	return ct
}

// BenchmarkCells runs the twelve cells on a Workspace, on a plain directory,
// on go-fuse's loopback filesystem of a plain directory and on libfuse's
// example/passthrough_hp of one (when built: scripts/libfuse, or
// LAYERFS_BENCH_PASSTHROUGH_HP=path; otherwise it says so and leaves the
// column out), the FUSE file systems over /dev/fuse and over io_uring (where
// the kernel has it: the package's tests turn enable_uring on for their
// run), and reports each cell's ratio to native (time / native time) on
// each, the Workspace's ratio to the loopback and to passthrough_hp over the
// same transport, their geometric means,
// plus mount, unmount and Commit times and the median daemon time per FUSE
// request (over /dev/fuse). LAYERFS_BENCH_CELLS=C01,C06 runs some cells
// only; LAYERFS_BENCH_OVERLAY=/dev/shm puts the overlay, the plain
// directories and the loopback's directory there (a tmpfs: the same
// filesystem for all of them, with no disk in the way); LAYERFS_BENCH_OPS=1
// logs the requests by opcode; LAYERFS_BENCH_SYSTEMS=layerfs/uring runs
// native and the systems named only (the others' columns left out);
// LAYERFS_BENCH_AB=KNOB (a name in benchKnobs) adds, beside each
// layerfs/TRANSPORT, layerfs-no-KNOB/TRANSPORT: the same without that
// change, taking turns with the rest, and each cell's ratio of the two.
func BenchmarkCells(b *testing.B) {
	needFUSE(b)
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("needs git for C12")
	}
	trs := transports
	if err := uringAvailable(); err != nil {
		b.Logf("io_uring left out: %v", err)
		trs = []uring.Transport{uring.Dev}
	}
	knob := benchKnob(b)
	systems := systems
	if knob != "" {
		for _, tr := range trs {
			systems = append(systems, "layerfs-no-"+knob+"/"+string(tr))
		}
	}
	hp, why := passthroughHP(b)
	if hp == "" {
		hpSkipped.Do(func() { fmt.Printf("BenchmarkCells: passthrough_hp column skipped: %s\n", why) })
	}
	src := b.TempDir()
	baseFile(b, src)
	// ratios[system][cell]: time over native, one per round.
	ratios := map[string]map[string][]float64{}
	ratio := func(system, cell string, r float64) {
		if ratios[system] == nil {
			ratios[system] = map[string][]float64{}
		}
		ratios[system][cell] = append(ratios[system][cell], r)
	}
	msecs := map[string]map[string][]float64{} // msecs[system][cell]: the timed runs
	var mounts, unmounts, medians []float64
	commits := map[string][]float64{}
	var reqs int64
	run := benchCells(b)
	if v := os.Getenv("LAYERFS_BENCH_CELLS"); v != "" {
		run = nil
		for _, c := range benchCells(b) {
			if strings.Contains(","+v+",", ","+c.name+",") {
				run = append(run, c)
			}
		}
	}
	for i := 0; i < b.N; i++ {
		for _, c := range run {
			ct := runCell(b, c, src, i, trs, hp, knob)
			native := ct.times["native"]
			for sys, t := range ct.times {
				if msecs[sys] == nil {
					msecs[sys] = map[string][]float64{}
				}
				msecs[sys][c.name] = append(msecs[sys][c.name], ms(t))
			}
			line := fmt.Sprintf("%s native %6.1f ms (warm-up %6.1f)", c.name, ms(native), ms(ct.nativeWarm))
			for _, sys := range systems[1:] {
				t, ok := ct.times[sys]
				if !ok {
					continue
				}
				ratio(sys, c.name, float64(t)/float64(native))
				line += fmt.Sprintf("  %s %6.1f ms %5.2fx", sys, ms(t), float64(t)/float64(native))
				if n, ok := ct.requests[sys]; ok {
					line += fmt.Sprintf(" (%d req)", n)
				}
			}
			// quot records system a's time over system b's, where both ran.
			quot := func(name, a, b string) (float64, bool) {
				ta, ok1 := ct.times[a]
				tb, ok2 := ct.times[b]
				if !ok1 || !ok2 {
					return 0, false
				}
				ratio(name, c.name, float64(ta)/float64(tb))
				return float64(ta) / float64(tb), true
			}
			for _, tr := range trs {
				quot("layerfs-vs-loopback/"+string(tr), "layerfs/"+string(tr), "loopback/"+string(tr))
				quot("layerfs-vs-passthrough_hp/"+string(tr), "layerfs/"+string(tr), "passthrough_hp/"+string(tr))
			}
			if r, ok := quot("uring-vs-dev", "layerfs/uring", "layerfs/dev"); ok {
				line += fmt.Sprintf("  uring/dev %.2f (%d on the rings)", r, ct.rings)
			}
			for _, tr := range trs {
				if r, ok := quot("with-vs-without/"+string(tr), "layerfs/"+string(tr), "layerfs-no-"+knob+"/"+string(tr)); ok {
					line += fmt.Sprintf("  with %s/without over %s %.2f", knob, tr, r)
				}
			}
			b.Log(line)
			mounts = append(mounts, ms(ct.mount))
			unmounts = append(unmounts, ms(ct.unmount))
			commits[c.name] = append(commits[c.name], ms(ct.commit))
			medians = append(medians, float64(ct.medianNs)/1e3)
			reqs += ct.requests["layerfs/dev"]
		}
	}
	// geomean is the geometric mean over the cells of each cell's median
	// ratio on system, each reported as CELL+suffix when suffix is set.
	geomean := func(system, suffix string) float64 {
		logSum := 0.0
		for _, c := range run {
			r := med(ratios[system][c.name])
			logSum += math.Log(r)
			if suffix != "" {
				b.ReportMetric(r, c.name+suffix)
			}
		}
		return math.Exp(logSum / float64(len(run)))
	}
	// Side by side: each system's median time and median ratio to native,
	// per cell, and the geometric means of the ratios. On stdout, since
	// the testing package cuts a benchmark's log at ten lines.
	// The last columns are LayerFS's time over passthrough_hp's, per
	// transport (the median of the rounds' quotients): at most 1 is the
	// goal.
	var vsHP []string
	for _, tr := range trs {
		if ratios["layerfs-vs-passthrough_hp/"+string(tr)] != nil {
			vsHP = append(vsHP, string(tr))
		}
	}
	table := fmt.Sprintf("BenchmarkCells: medians of %d rounds (LAYERFS_BENCH_OVERLAY=%q, TMPDIR=%q)\n%-5s %9s", b.N, os.Getenv("LAYERFS_BENCH_OVERLAY"), os.Getenv("TMPDIR"), "cell", "native")
	for _, sys := range systems[1:] {
		if ratios[sys] != nil {
			table += fmt.Sprintf(" %22s", sys)
		}
	}
	for _, tr := range vsHP {
		table += fmt.Sprintf(" %15s", "layerfs/hp "+tr)
	}
	for _, c := range run {
		table += fmt.Sprintf("\n%-5s %6.1f ms", c.name, med(msecs["native"][c.name]))
		for _, sys := range systems[1:] {
			if ratios[sys] != nil {
				table += fmt.Sprintf(" %9.1f ms (%6.2fx)", med(msecs[sys][c.name]), med(ratios[sys][c.name]))
			}
		}
		for _, tr := range vsHP {
			table += fmt.Sprintf(" %14.2fx", med(ratios["layerfs-vs-passthrough_hp/"+tr][c.name]))
		}
	}
	table += fmt.Sprintf("\n%-5s %9s", "geo", "")
	for _, sys := range systems[1:] {
		if ratios[sys] != nil {
			table += fmt.Sprintf(" %12s(%6.2fx)", "", geomean(sys, ""))
		}
	}
	for _, tr := range vsHP {
		table += fmt.Sprintf(" %14.2fx", geomean("layerfs-vs-passthrough_hp/"+tr, ""))
	}
	fmt.Println(table)
	// metric reports the geomean of a system's ratios, where it ran.
	metric := func(system, suffix, unit string) {
		if ratios[system] != nil {
			b.ReportMetric(geomean(system, suffix), unit)
		}
	}
	metric("layerfs/dev", "-ratio", "geomean-ratio")
	metric("layerfs-vs-loopback/dev", "-vs-loopback", "geomean-vs-loopback")
	metric("loopback/dev", "", "loopback-geomean-ratio")
	metric("layerfs/uring", "-ratio-uring", "geomean-ratio-uring")
	metric("layerfs-vs-loopback/uring", "", "geomean-vs-loopback-uring")
	metric("loopback/uring", "", "loopback-geomean-ratio-uring")
	metric("uring-vs-dev", "", "geomean-uring-vs-dev")
	for _, tr := range trs {
		metric("with-vs-without/"+string(tr), "-with-vs-without-"+string(tr), "geomean-with-vs-without-"+string(tr))
	}
	for _, tr := range vsHP {
		metric("passthrough_hp/"+tr, "", "passthrough_hp-geomean-ratio-"+tr)
		metric("layerfs-vs-passthrough_hp/"+tr, "", "geomean-vs-passthrough_hp-"+tr)
	}
	b.ReportMetric(med(mounts), "mount-ms")
	b.ReportMetric(med(unmounts), "unmount-ms")
	b.ReportMetric(med(commits["C06"]), "commit-64MiB-ms")
	b.ReportMetric(med(medians), "req-median-µs")
	b.ReportMetric(float64(reqs)/float64(b.N), "requests/op")
}

// BenchmarkCommit64MiB measures Commit of one new 64 MiB file, per profile.
func BenchmarkCommit64MiB(b *testing.B) {
	needFUSE(b)
	for _, p := range []Profile{ProfileDisposable, ProfileFast, ProfileDurable} {
		b.Run(string(p), func(b *testing.B) {
			ctx := context.Background()
			s, err := Init(ctx, filepath.Join(b.TempDir(), "store"), p)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ws := mountWS(b, s, nil)
			var times []float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runBody(b, ws.Mountpoint(), fmt.Sprintf(`dd if=/dev/urandom of=big%d bs=1M count=64 2>/dev/null`, i))
				b.StartTimer()
				res, err := ws.Commit(ctx, "big")
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, float64(res.DurationNs)/1e6)
			}
			b.ReportMetric(med(times), "commit-ms")
		})
	}
}

// BenchmarkMount measures mount and unmount of a Layer of 1,000 files.
func BenchmarkMount(b *testing.B) {
	needFUSE(b)
	ctx := context.Background()
	src := b.TempDir()
	runBody(b, src, "sh "+filepath.Join(testenv.ModuleRoot(b), "runner", "cells", "C01.sh"))
	s := newStore(b, ProfileDisposable)
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	mnt := filepath.Join(b.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	var mounts, unmounts []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws, err := Mount(ctx, s, mnt, MountOptions{Layer: l, Transport: uring.Dev})
		if err != nil {
			b.Fatal(err)
		}
		res, err := ws.Unmount(5 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		mounts = append(mounts, ms(ws.mountDur))
		unmounts = append(unmounts, float64(res.DurationNs)/1e6)
	}
	b.ReportMetric(med(mounts), "mount-ms")
	b.ReportMetric(med(unmounts), "unmount-ms")
}

// benchSystem says whether BenchmarkCells runs system: all of them, or
// those LAYERFS_BENCH_SYSTEMS names (native always runs: it is what the
// ratios divide by).
func benchSystem(system string) bool {
	v := os.Getenv("LAYERFS_BENCH_SYSTEMS")
	return v == "" || strings.Contains(","+v+",", ","+system+",")
}

// hpSkipped says once per run that the passthrough_hp column is left out.
var hpSkipped sync.Once

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func med(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkColdReadVerify is C09 (read the 64 MiB base file) from a cold
// page cache, with the blob checked against its digest on first open (the
// default) and without (MountOptions.NoVerify), alternating which goes
// first. Each read is a fresh mount (verification is once per blob per
// daemon) after the blob's pages were dropped (POSIX_FADV_DONTNEED).
// It reports both medians and their ratio: what verification costs.
func BenchmarkColdReadVerify(b *testing.B) {
	needFUSE(b)
	ctx := context.Background()
	src := b.TempDir()
	baseFile(b, src)
	s := newStore(b, ProfileDisposable)
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ents, err := s.loadTree(ctx, l.Root.Content)
	if err != nil || len(ents) != 1 {
		b.Fatalf("base layer: %v %v", ents, err)
	}
	name, blob := ents[0].Name, s.blobPath(ents[0].Content)
	mnt := filepath.Join(b.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	// Three ways to open: checked by the blob's stamp (what a daemon does
	// with a blob its Store wrote or checked), checked by reading it (a
	// blob without a stamp, or one that changed), and not checked.
	const (
		stamp = iota
		hash
		off
	)
	coldRead := func(how int) float64 {
		f, err := os.Open(blob)
		if err != nil {
			b.Fatal(err)
		}
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		// A daemon checks a blob once: this process's Store forgets.
		s.verified.Range(func(k, _ any) bool { s.verified.Delete(k); return true })
		if how == hash {
			if err := s.forgetStamps(ctx, []Digest{ents[0].Content}); err != nil {
				b.Fatal(err)
			}
		}
		hashed := s.verifiedBytes.Load()
		ws, err := Mount(ctx, s, mnt, MountOptions{Layer: l, Transport: uring.Dev, NoVerify: how == off})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		data, err := os.ReadFile(filepath.Join(mnt, name))
		d := time.Since(t0)
		if err != nil || len(data) != 64<<20 {
			b.Fatalf("reading the base file: %d bytes, %v", len(data), err)
		}
		if _, err := ws.Unmount(5 * time.Second); err != nil {
			b.Fatal(err)
		}
		// Each way did what it says: only "hash" reads the blob to check it.
		if read := s.verifiedBytes.Load() - hashed; (read > 0) != (how == hash) {
			b.Fatalf("open %d read %d bytes to check the blob", how, read)
		}
		return ms(d)
	}
	times := make([][]float64, 3)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each way first, second and last equally often.
		for j := 0; j < 3; j++ {
			how := (i + j) % 3
			times[how] = append(times[how], coldRead(how))
		}
	}
	b.StopTimer()
	st, hs, no := med(times[stamp]), med(times[hash]), med(times[off])
	b.ReportMetric(st, "stamp-ms")
	b.ReportMetric(hs, "hash-ms")
	b.ReportMetric(no, "unverified-ms")
	b.ReportMetric(st/no, "stamp/off")
	b.ReportMetric(hs/no, "hash/off")
	b.Logf("cold read of 64 MiB: %.1f ms checked by stamp, %.1f ms checked by reading, %.1f ms unchecked (medians of %d each; stamp/off %.2f, hash/off %.2f)",
		st, hs, no, len(times[off]), st/no, hs/no)
}
