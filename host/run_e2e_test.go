package host_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/host"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/provision/provisiontest"
)

func TestMain(m *testing.M) { provisiontest.Main(m) }

// TestRunOnLocalWithoutCobra drives a run through the library, as the
// command does: open the bundle (verified once), bring local up, load the
// image, then tear down and audit. The test bundle holds the stand-in but
// no runner, so the runner refuses the run's pins before any sample (a
// real bundle always has one; make test's run tests sample for real): Run
// must still tear everything down, audit it clean, and name the samples
// that are missing.
func TestRunOnLocalWithoutCobra(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
	b := provisiontest.GetBundle(t)
	ctx := context.Background()
	opened, err := host.OpenBundle(ctx, host.BundleOptions{Dir: b.Dir, Key: b.PubKey, Expect: b.Name, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if opened.Image.ID != b.Image.ID {
		t.Fatalf("OpenBundle found image %s, the bundle's is %s", opened.Image.ID, b.Image.ID)
	}
	out := t.TempDir()
	o, err := host.Run(ctx, host.RunOptions{Bundle: opened, Targets: []string{"local"}, Cells: []string{"C01"}, Samples: 1, Seed: 1,
		Out: out, StateDir: t.TempDir(), Log: t.Logf})
	if err == nil || !strings.Contains(err.Error(), "1 samples missing (local C01 round 0") {
		t.Fatalf("Run: %v, want the missing sample named", err)
	}
	if o == nil || o.Samples != 0 || o.Kept || len(o.Leftovers) != 0 || o.Teardown == nil || len(o.Teardown.Removed) == 0 || o.Targets["local"] == nil {
		t.Fatalf("outcome %+v: want local up, then torn down with nothing left", o)
	}
}
