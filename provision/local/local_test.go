package local_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/local"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	provisiontest.Main(m)
}

func newLocal(t testing.TB, run *runs.Run, b *provisiontest.Bundle) *local.Local {
	l, err := local.New(local.Options{Run: run, Bundle: b.Dir, Standin: b.Standin, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConformance(t *testing.T) {
	testenv.NeedRoot(t) // the stand-in makes namespaces
	b := provisiontest.GetBundle(t)
	provisiontest.Run(t, &provisiontest.Suite{
		New:    func(t *testing.T, run *runs.Run) provision.Target { return newLocal(t, run, b) },
		Image:  b.Image,
		Engine: manifests.EngineStandin,
	})
}

// TestChangedStandinIsRefused: the bytes run are the bytes verified.
func TestChangedStandinIsRefused(t *testing.T) {
	b := provisiontest.GetBundle(t)
	run, _ := provisiontest.NewRun(t)
	l, err := local.New(local.Options{Run: run, Bundle: b.Dir, Standin: manifests.DigestOf([]byte("another binary"))})
	if err != nil {
		t.Fatal(err)
	}
	err = l.Create(context.Background())
	if err == nil || !strings.Contains(err.Error(), "verify it again") {
		t.Fatalf("Create with a stand-in that differs from the manifest: %v", err)
	}
	if ps := runs.FindProcs(func(argv []string) bool { return strings.HasPrefix(argv[0], run.Dir) }); len(ps) > 0 {
		t.Errorf("a stand-in runs: %v", ps)
	}
	if _, err := runs.Teardown(context.Background(), run.Dir, runs.TeardownOptions{}); err != nil {
		t.Fatal(err)
	}
}

const crashChildEnv = "SEALBENCH_TEST_CRASH_CHILD"

// crashChild provisions local as `sealbench provision local` does, saying
// "recorded N" on stdout after each ledger entry is durable, and "done"
// at the end; then it waits to be killed.
func crashChild() {
	var cfg struct {
		State, Bundle string
		Standin       manifests.Digest
		Image         engine.Image
	}
	if err := json.Unmarshal([]byte(os.Getenv(crashChildEnv)), &cfg); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	run, err := runs.NewRun(cfg.State)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Printf("run %s\n", run.ID)
	run.Ledger.AfterRecord = func(e manifests.LedgerEntry) { fmt.Printf("recorded %d %s\n", e.Seq, e.Name()) }
	l, err := local.New(local.Options{Run: run, Bundle: cfg.Bundle, Standin: cfg.Standin})
	if err == nil {
		err = l.Create(context.Background())
	}
	if err == nil {
		err = l.InstallImage(context.Background(), cfg.Image)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("done")
	time.Sleep(time.Hour)
}

// TestCrashThenTeardownLeavesNothing starts provisioning local in a child
// process, kills it with SIGKILL at a seeded point (after the Nth ledger
// entry, plus a seeded delay that may land mid-creation; or once
// provisioning is done), then tears the run down from its ledger and
// audits: no process, mount, socket or directory may be left.
// SEALBENCH_CRASH_SEED replays a seed.
func TestCrashThenTeardownLeavesNothing(t *testing.T) {
	testenv.NeedRoot(t)
	b := provisiontest.GetBundle(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEALBENCH_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with SEALBENCH_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// The local target records entries 2 to 6 (target dir, state
	// directory, socket, process, image; 1 is the run directory, made
	// before the hook is set); 7 stands for "after done".
	points := []int{rng.IntN(5) + 2, rng.IntN(5) + 2, 7}
	for i, point := range points {
		delay := time.Duration(rng.IntN(40)) * time.Millisecond
		t.Run(fmt.Sprintf("trial%d-after%d+%s", i, point, delay), func(t *testing.T) {
			crashTrial(t, b, point, delay)
		})
	}
}

func crashTrial(t *testing.T, b *provisiontest.Bundle, point int, delay time.Duration) {
	state := testenv.ShortTempDir(t, "sbt-")
	cfg, _ := json.Marshal(map[string]any{"State": state, "Bundle": b.Dir, "Standin": b.Standin, "Image": b.Image})
	cmd, out := testenv.StartSelf(t, crashChildEnv+"="+string(cfg))
	sc := bufio.NewScanner(out)
	var runID string
	var seen []string
	deadline := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		seen = append(seen, line)
		if id, ok := strings.CutPrefix(line, "run "); ok {
			runID = id
		}
		if strings.HasPrefix(line, "error") {
			t.Fatalf("child: %s", line)
		}
		if point == 7 && line == "done" || strings.HasPrefix(line, fmt.Sprintf("recorded %d ", point)) {
			time.Sleep(delay)
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	go func() { // drain, so the child never blocks on a full pipe
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	t.Logf("killed the child after: %s", strings.Join(seen, "; "))
	if runID == "" {
		t.Fatal("the child never said its run id")
	}
	runDir := filepath.Join(runs.RunsDir(state), runID)
	ctx := context.Background()
	if point == 7 {
		// The stand-in outlived its parent: the audit must see it.
		res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Targets: []string{local.Name}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range res.Leftovers {
			found = found || r.Kind == manifests.ResourceProcess
		}
		if !found {
			t.Errorf("before teardown, the audit does not see the running stand-in: %v", res.Leftovers)
		}
	}
	for i := range 2 { // twice: absent is done
		res, err := runs.Teardown(ctx, runDir, runs.TeardownOptions{Log: t.Logf, Grace: 5 * time.Second})
		if err != nil {
			t.Fatalf("teardown #%d after the crash: %v", i+1, err)
		}
		for _, w := range res.Warnings {
			t.Logf("teardown warning: %s", w)
		}
	}
	res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Targets: []string{local.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) > 0 {
		var ls []string
		for _, r := range res.Leftovers {
			ls = append(ls, r.String())
		}
		t.Errorf("left after teardown:\n  %s", strings.Join(ls, "\n  "))
	}
	if ps := runs.FindProcs(func(argv []string) bool { return strings.Contains(strings.Join(argv, " "), state) }); len(ps) > 0 {
		t.Errorf("processes left: %v", ps)
	}
	if ms, _ := runs.MountsUnder(state); len(ms) > 0 {
		t.Errorf("mounts left: %v", ms)
	}
	if ents, _ := os.ReadDir(runs.RunsDir(state)); len(ents) > 0 {
		t.Errorf("entries left in runs/: %v", ents)
	}
}
