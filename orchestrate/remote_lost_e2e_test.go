package orchestrate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestHostLostMidRun cuts a local@ssh host off (its sshd and every
// process it spawned killed) as soon as its runner reports its first
// sample: that host's samples are all recorded as failed with the reason,
// the run here takes all of its own, the run says samples failed, and a
// later teardown, with the host back, leaves nothing there. Alone, the
// lost host's failed samples are the run's, with its pins and report.
func TestHostLostMidRun(t *testing.T) {
	sshtest.Need(t)
	t.Run("beside local", func(t *testing.T) { hostLostMidRun(t, "local") })
	t.Run("alone", func(t *testing.T) { hostLostMidRun(t) })
}

func hostLostMidRun(t *testing.T, here ...string) {
	h, hostState := runnerHost(t)
	b := provisiontest.GetRunnerBundle(t)
	ctx := context.Background()
	opened := openBundle(t, b)
	specs, err := orchestrate.CheckTargets(append(here, fmt.Sprintf("far=local@ssh://%s@%s:%d", h.User, h.Addr, h.Port)))
	if err != nil {
		t.Fatal(err)
	}
	far := specs[len(specs)-1]
	hostName := far.Host.String()
	var cut sync.Once
	logf := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		t.Log(time.Now().Format("15:04:05.000 ") + line)
		if strings.HasPrefix(line, hostName+": far C01 ") {
			cut.Do(h.Stop)
		}
	}
	state := testenv.ShortTempDir(t, "sbh-")
	const rounds = 3
	o, err := orchestrate.Run(ctx, orchestrate.RunOptions{Bundle: opened, Targets: orchestrate.Names(specs), Specs: map[string]remote.Spec{"far": far},
		SSH: orchestrate.SSH{Identity: h.ClientKey, KnownHosts: h.KnownHosts}, Cells: []string{"C01"}, Samples: rounds, Seed: 1,
		Out: t.TempDir(), StateDir: state, Log: logf})
	if err == nil || !strings.Contains(err.Error(), "samples failed") {
		t.Fatalf("Run: %v, want failed samples reported", err)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(o.Dir, manifests.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	lost := "host " + hostName + " lost: "
	per := map[string]int{}
	for _, s := range samples {
		per[s.Target]++
		switch {
		case s.Target == "far" && (!s.Failed() || !strings.Contains(s.Reason, lost)):
			t.Errorf("far %s round %d: %s %q, want failed as %q...", s.Cell, s.Round, s.Status, s.Reason, lost)
		case s.Target == "local" && strings.Contains(s.Reason, "lost"):
			t.Errorf("local %s round %d: %q: the host's loss reached this machine's samples", s.Cell, s.Round, s.Reason)
		}
	}
	want := map[string]int{"far": rounds}
	for _, name := range here {
		want[name] = rounds
	}
	if fmt.Sprint(per) != fmt.Sprint(want) {
		t.Errorf("samples per target %v, want %v", per, want)
	}
	if md, err := os.ReadFile(filepath.Join(o.Dir, "report.md")); err != nil || !strings.Contains(string(md), hostName) {
		t.Errorf("report.md (%v) does not name %s:\n%s", err, hostName, md)
	}
	// The host comes back; a later teardown finishes there.
	h.Restart()
	if _, err := orchestrate.Teardown(ctx, orchestrate.TeardownOptions{Run: o.Run, StateDir: state, SSH: orchestrate.SSH{Identity: h.ClientKey, KnownHosts: h.KnownHosts}, Log: t.Logf}); err != nil {
		t.Fatalf("teardown with the host back: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(hostState, "remote", "*")); len(left) > 0 {
		t.Errorf("the host still holds %v", left)
	}
	// And the audit, which asks the run's hosts too, finds nothing of it.
	res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: o.Run, SSH: runs.SSHOptions{Identity: h.ClientKey, KnownHosts: h.KnownHosts}})
	if err != nil || len(res.Leftovers) != 0 {
		t.Errorf("the audit after the later teardown: %v, %+v", err, res)
	}
}
