package orchestrate_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/runs"
)

// TestTeardownLeavesARunInProgress: `teardown --all` while another
// process holds a run's lock (a `sealbench run` still at work) leaves
// that run as it is and says so, and tears down the others; `teardown
// --run` of it fails; --force tears it down.
func TestTeardownLeavesARunInProgress(t *testing.T) {
	flock := testenv.NeedCommand(t, "flock")
	state := t.TempDir()
	mk := func() (*runs.Run, string) {
		run, err := runs.NewRun(state)
		if err != nil {
			t.Fatal(err)
		}
		work := filepath.Join(run.Dir, "work")
		if err := run.Ledger.Record(manifests.LedgerEntry{Target: "local", Kind: manifests.ResourceDir, Key: work}); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(work, 0o700); err != nil {
			t.Fatal(err)
		}
		run.Close()
		return run, work
	}
	busy, busyWork := mk()
	done, _ := mk()
	holder := exec.Command(flock, "--exclusive", filepath.Join(busy.Dir, runs.LockFile), "sleep", "600")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	go holder.Wait()
	t.Cleanup(func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL) })
	// The holder's pid, as a run's process writes its own.
	if err := os.WriteFile(filepath.Join(busy.Dir, runs.LockFile), []byte(strconv.Itoa(holder.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if b, _ := runs.InProgress(busy.Dir); b {
			break
		}
		if i > 400 {
			t.Fatal("the lock is never held")
		}
		time.Sleep(25 * time.Millisecond)
	}

	ctx := context.Background()
	results, err := orchestrate.Teardown(ctx, orchestrate.TeardownOptions{All: true, StateDir: state, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	byRun := map[string]*runs.TeardownResult{}
	for _, r := range results {
		byRun[r.Run] = r
	}
	if r := byRun[busy.ID]; r == nil || r.InProgress == "" || len(r.Removed) != 0 {
		t.Errorf("teardown --all: the run in progress: %+v, want it left as it is and said so", r)
	}
	if _, err := os.Stat(busyWork); err != nil {
		t.Fatalf("teardown --all removed %s of a run in progress: %v", busyWork, err)
	}
	if _, err := os.Stat(done.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("teardown --all left the run no one holds: %v", err)
	}
	var ip *runs.InProgressError
	if _, err := orchestrate.Teardown(ctx, orchestrate.TeardownOptions{Run: busy.ID, StateDir: state}); !errors.As(err, &ip) {
		t.Errorf("teardown --run of a run in progress: %v, want an *InProgressError", err)
	}
	if _, err := orchestrate.Teardown(ctx, orchestrate.TeardownOptions{Run: busy.ID, StateDir: state, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(busy.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("teardown --run --force left the run directory: %v", err)
	}
}
