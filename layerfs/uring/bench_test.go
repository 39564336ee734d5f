//go:build linux

package uring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
)

// createFiles is C01's body without the shell: n files made with open,
// write and close, as shell redirections make them.
func createFiles(dir string, n int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for i := range n {
		fd, err := unix.Open(filepath.Join(dir, "f"+strconv.Itoa(i)), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		_, err = unix.Write(fd, []byte("file "+strconv.Itoa(i)+"\n"))
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// c01 is cell C01's body: 1,000 files made by shell redirections, in a
// process of their own as in a Sandbox.
const c01 = `i=0; while [ $i -lt 1000 ]; do echo "file $i" > f$i; i=$((i+1)); done`

// shellCreate runs C01's body with dir, new, as its working directory.
func shellCreate(dir string, _ int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("sh", "-c", c01)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sh: %v: %s", err, out)
	}
	return nil
}

// BenchmarkCreate creates 1,000 files natively, on a loopback of the same
// filesystem over /dev/fuse, and on one over io_uring, side by side: each
// round runs all three, in an order that rotates, into fresh directories.
// It reports each one's median time per round and the ratios between them,
// on /dev/shm (a tmpfs) and on the temporary directory's filesystem.
//
//	go test ./layerfs/uring/ -run '^$' -bench Create -benchtime 10x
//
// Like TestURing, it turns enable_uring on for its run and restores it.
func BenchmarkCreate(b *testing.B) {
	benchCreate(b, "in process", createFiles)
}

// BenchmarkC01 is BenchmarkCreate with cell C01's body, a shell in a
// process of its own making the files, as the cells run.
func BenchmarkC01(b *testing.B) {
	testenv.NeedCommand(b, "sh")
	benchCreate(b, "C01 (sh)", shellCreate)
}

func benchCreate(b *testing.B, what string, create func(dir string, n int) error) {
	withURingEnabled(b)
	const files = 1000
	for _, base := range []struct{ name, dir string }{{"shm", "/dev/shm"}, {"tmp", os.TempDir()}} {
		b.Run(base.name, func(b *testing.B) {
			if _, err := os.Stat(base.dir); err != nil {
				testenv.Skip(b, "needs %s: %v", base.dir, err)
			}
			mk := func(prefix string) string {
				d, err := os.MkdirTemp(base.dir, "uring-bench-"+prefix+"-")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(d) })
				return d
			}
			native := mk("native")
			devSrc, uringSrc := mk("dev"), mk("uring")
			dev := mountLoopback(b, devSrc, b.TempDir(), Dev)
			ur := mountLoopback(b, uringSrc, b.TempDir(), URing)
			if ur.Transport() != URing {
				b.Fatalf("io_uring mount fell back: %v", ur.Reason())
			}
			targets := []struct {
				name string
				dir  string
			}{{"native", native}, {"dev", dev.Dir()}, {"uring", ur.Dir()}}
			times := make([][]time.Duration, len(targets))
			b.ResetTimer()
			for round := 0; round < b.N; round++ {
				for k := range targets {
					i := (round + k) % len(targets)
					t0 := time.Now()
					if err := create(filepath.Join(targets[i].dir, "r"+strconv.Itoa(round)), files); err != nil {
						b.Fatalf("%s: %v", targets[i].name, err)
					}
					times[i] = append(times[i], time.Since(t0))
				}
			}
			b.StopTimer()
			med := make([]float64, len(targets))
			for i, ts := range times {
				slices.Sort(ts)
				med[i] = float64(ts[len(ts)/2]) / float64(time.Millisecond)
				b.ReportMetric(med[i], targets[i].name+"-ms")
			}
			b.ReportMetric(med[1]/med[0], "dev/native")
			b.ReportMetric(med[2]/med[0], "uring/native")
			b.ReportMetric(med[2]/med[1], "uring/dev")
			st := ur.Stats()
			b.Log(fmt.Sprintf("%s %s, %d files, median of %d rounds: native %.1f ms, /dev/fuse %.1f ms (%.2fx), io_uring %.1f ms (%.2fx); io_uring/dev %.2f; ring requests %d, /dev/fuse requests %d",
				what, base.dir, files, b.N, med[0], med[1], med[1]/med[0], med[2], med[2]/med[0], med[2]/med[1], st.RingRequests, st.DevRequests))
			b.StartTimer()
		})
	}
}
