//go:build linux

package layerfs

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/runner/cells"
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

type cellTimes struct {
	native, layerfs        time.Duration
	loopback               time.Duration
	loopbackRequests       int64
	nativeWarm             time.Duration
	mount, unmount, commit time.Duration
	requests               int64
	medianNs               int64
}

// runPlain runs c's body in a fresh directory made in parent (with the base
// file when c needs it), directly or, when mnt is set, through go-fuse's
// loopback filesystem mounted at mnt with the Workspace's kernel settings,
// whose request counts it returns; the directory goes afterwards.
func runPlain(b *testing.B, c cell, parent, prefix, mnt string) (time.Duration, *telemetry) {
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
	if mnt == "" {
		return runBody(b, d, c.body), nil
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		b.Fatal(err)
	}
	unmount, tel := mountLoopback(b, d, mnt)
	defer unmount()
	return runBody(b, mnt, c.body), tel
}

// runCell runs one cell with the cache protocol: a fresh Store, an untimed
// warm-up run on an earlier mount, then a fresh mount for the timed run,
// then Commit and unmount; and the same body, also after a warm-up, on a
// plain directory of the same filesystem and through go-fuse's loopback of
// one, the three in the order round picks.
func runCell(b *testing.B, c cell, src string, round int) cellTimes {
	var ct cellTimes
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
	var l *Layer
	if c.base {
		if l, err = s.Import(ctx, src, ImportOptions{Message: "base"}); err != nil {
			b.Fatal(err)
		}
	}
	runs := []func(){
		func() {
			for i := 0; i < 2; i++ {
				t, _ := runPlain(b, c, overlays, "native-", "")
				if i == 1 {
					ct.native = t
				} else {
					ct.nativeWarm = t
				}
			}
		},
		func() {
			// go-fuse's own loopback filesystem over a neighbour directory, with
			// the Workspace's kernel settings: what any FUSE filesystem costs
			// here, so the ratio to it is LayerFS's own share.
			for i := 0; i < 2; i++ {
				mnt := filepath.Join(root, fmt.Sprintf("loopback%d", i))
				t, tel := runPlain(b, c, overlays, "loopback-", mnt)
				if i == 1 {
					ct.loopback = t
					_, all := tel.snapshot()
					ct.loopbackRequests = all.Count
				}
			}
		},
		func() {
			for i := 0; i < 2; i++ {
				mnt := filepath.Join(root, fmt.Sprintf("mnt%d", i))
				os.Mkdir(mnt, 0o755)
				ws, err := Mount(ctx, s, mnt, MountOptions{Layer: l, OverlayDir: overlays})
				if err != nil {
					b.Fatal(err)
				}
				t := runBody(b, mnt, c.body)
				if i == 1 {
					ct.layerfs = t
					ct.mount = ws.mountDur
					st, err := ws.Stats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					ct.requests, ct.medianNs = st.AllRequests.Count, st.AllRequests.MedianNs
					if os.Getenv("LAYERFS_BENCH_OPS") != "" {
						b.Logf("%s requests: %v", c.name, st.Requests)
					}
					res, err := ws.Commit(ctx, c.name)
					if err != nil {
						b.Fatal(err)
					}
					ct.commit = time.Duration(res.DurationNs)
				}
				res, err := ws.Unmount(5 * time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if i == 1 {
					ct.unmount = time.Duration(res.DurationNs)
				}
			}
		},
	}
	// The three run in an order that turns with round: what creating a
	// file costs on this machine's ext4 also changes with what happened
	// nearby in the last minutes (after creating and deleting thousands of
	// files it went from 50 to 240 µs a minute later), so whichever always
	// ran last would pay for the others' churn.
	for i := range runs {
		runs[(i+round)%len(runs)]()
	}
	return ct
}

// BenchmarkCells runs the twelve cells on a Workspace, on a plain directory
// and on go-fuse's loopback filesystem of a plain directory, and reports
// each cell's ratio to native (Workspace time / native time) and to the
// loopback, their geometric means, the loopback's own ratio to native, plus
// mount, unmount and Commit times and the median daemon time per FUSE
// request. LAYERFS_BENCH_CELLS=C01,C06 runs some cells only;
// LAYERFS_BENCH_OVERLAY=/dev/shm puts the overlay, the plain directories and
// the loopback's directory there (a tmpfs: the same filesystem for all
// three, with no disk in the way); LAYERFS_BENCH_OPS=1 logs the requests
// by opcode.
func BenchmarkCells(b *testing.B) {
	needFUSE(b)
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("needs git for C12")
	}
	src := b.TempDir()
	baseFile(b, src)
	ratios := map[string][]float64{}
	vsLoopback := map[string][]float64{}
	loopback := map[string][]float64{}
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
			ct := runCell(b, c, src, i)
			ratios[c.name] = append(ratios[c.name], float64(ct.layerfs)/float64(ct.native))
			vsLoopback[c.name] = append(vsLoopback[c.name], float64(ct.layerfs)/float64(ct.loopback))
			loopback[c.name] = append(loopback[c.name], float64(ct.loopback)/float64(ct.native))
			mounts = append(mounts, ms(ct.mount))
			unmounts = append(unmounts, ms(ct.unmount))
			commits[c.name] = append(commits[c.name], ms(ct.commit))
			medians = append(medians, float64(ct.medianNs)/1e3)
			reqs += ct.requests
			b.Logf("%s native %6.1f ms (warm-up %6.1f)  loopback %6.1f ms (%d requests)  layerfs %6.1f ms (%d requests, median %.2f µs)  ratio %.2f, to loopback %.2f  commit %6.1f ms",
				c.name, ms(ct.native), ms(ct.nativeWarm), ms(ct.loopback), ct.loopbackRequests, ms(ct.layerfs), ct.requests, float64(ct.medianNs)/1e3,
				float64(ct.layerfs)/float64(ct.native), float64(ct.layerfs)/float64(ct.loopback), ms(ct.commit))
		}
	}
	geomean := func(rs map[string][]float64, suffix string) float64 {
		logSum := 0.0
		for _, c := range run {
			r := med(rs[c.name])
			logSum += math.Log(r)
			if suffix != "" {
				b.ReportMetric(r, c.name+suffix)
			}
		}
		return math.Exp(logSum / float64(len(run)))
	}
	b.ReportMetric(geomean(ratios, "-ratio"), "geomean-ratio")
	b.ReportMetric(geomean(vsLoopback, "-vs-loopback"), "geomean-vs-loopback")
	b.ReportMetric(geomean(loopback, ""), "loopback-geomean-ratio")
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
	s, err := Init(ctx, filepath.Join(b.TempDir(), "store"), ProfileDisposable)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := s.Import(ctx, src, ImportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	mnt := filepath.Join(b.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	var mounts, unmounts []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws, err := Mount(ctx, s, mnt, MountOptions{Layer: l})
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

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func med(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
