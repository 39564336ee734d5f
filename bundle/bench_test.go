package bundle

import (
	"context"
	"crypto/rand"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
)

// BenchmarkVerifyVsSha256sum verifies one bundle (six 16 MiB binaries and
// twelve cell bodies, about the size of a real one) as a directory and as a
// tar, and runs `sha256sum -c` over the same files, side by side in every
// iteration, all from the page cache. It reports each throughput and the
// ratios to sha256sum (goal: at least 0.9).
func BenchmarkVerifyVsSha256sum(b *testing.B) {
	sum := testenv.NeedCommand(b, "sha256sum")
	k := newKeys(b)
	files := map[string]string{}
	for i := range 6 {
		buf := make([]byte, 16<<20)
		rand.Read(buf)
		files[fmt.Sprintf("bin/linux-%d/part", i)] = string(buf)
	}
	for i := 1; i <= 12; i++ {
		files[fmt.Sprintf("cells/C%02d.sh", i)] = "echo cell\n"
	}
	bundle := makeBundle(b, k, files)
	ctx := context.Background()
	var dirT, dir1T, tarT, sumT time.Duration
	timeIt := func(acc *time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*acc += time.Since(start)
	}
	verify := func(p string, workers int) func() error {
		return func() error {
			_, err := Verify(ctx, p, VerifyOptions{Verifier: k.verifier, Workers: workers})
			return err
		}
	}
	sha256sum := func() error {
		cmd := exec.Command(sum, "-c", "--quiet", manifests.SumsFile)
		cmd.Dir = bundle.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sha256sum: %v: %s", err, out)
		}
		return nil
	}
	// Warm the page cache once, untimed.
	verify(bundle.Dir, 0)()
	verify(bundle.Tar, 0)()
	b.SetBytes(bundle.Bytes)
	b.ResetTimer()
	for range b.N {
		timeIt(&dirT, verify(bundle.Dir, 0))
		timeIt(&dir1T, verify(bundle.Dir, 1))
		timeIt(&tarT, verify(bundle.Tar, 0))
		timeIt(&sumT, sha256sum)
	}
	mbps := func(d time.Duration) float64 {
		return float64(bundle.Bytes) * float64(b.N) / d.Seconds() / 1e6
	}
	b.ReportMetric(mbps(dirT), "dir-MB/s")
	b.ReportMetric(mbps(dir1T), "dir-1worker-MB/s")
	b.ReportMetric(mbps(tarT), "tar-MB/s")
	b.ReportMetric(mbps(sumT), "sha256sum-MB/s")
	b.ReportMetric(sumT.Seconds()/dirT.Seconds(), "dir/sha256sum")
	b.ReportMetric(sumT.Seconds()/dir1T.Seconds(), "dir-1worker/sha256sum")
	b.ReportMetric(sumT.Seconds()/tarT.Seconds(), "tar/sha256sum")
}

// BenchmarkSealWarm seals the source tree with the build cache already warm
// (one untimed seal first). Goal: under 15 s.
func BenchmarkSealWarm(b *testing.B) {
	k := newKeys(b)
	root := testenv.ModuleRoot(b)
	ctx := context.Background()
	seal := func() {
		if _, err := Seal(ctx, SealOptions{Source: root, OutDir: b.TempDir(), Signer: k.signer}); err != nil {
			b.Fatal(err)
		}
	}
	seal()
	b.ResetTimer()
	for range b.N {
		seal()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/seal")
}
