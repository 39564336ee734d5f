package runs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/volume"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// remoteRun is a run with resources on a fake host: the host shares this
// machine's filesystem and processes, so the test sees what teardown did
// there, and the host's "state directory" is a directory of its own.
type remoteRun struct {
	state, host string
	run         *Run
	h           *sshtest.Host
	remoteDir   string // the run's directory on the host
	local       string // a directory of the same target on this host
	proc        *exec.Cmd
}

func newRemoteRun(t *testing.T) *remoteRun {
	t.Helper()
	h := sshtest.Start(t, "127.0.0.2")
	state, run := newTestRun(t)
	r := &remoteRun{state: state, run: run, h: h, host: fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)}
	if err := RecordHost(run.Dir, HostRecord{Host: r.host, KnownHosts: h.KnownHosts, Identity: h.ClientKey}); err != nil {
		t.Fatal(err)
	}
	r.remoteDir = filepath.Join(t.TempDir(), "runs", run.ID)
	r.local = filepath.Join(run.Dir, "docker-h")
	exe := filepath.Join(r.remoteDir, "bin", "tail")
	marker := filepath.Join(r.remoteDir, "state")
	const target = "docker-h"
	for _, e := range []manifests.LedgerEntry{
		{Target: target, Kind: manifests.ResourceDir, Key: r.local},
		{Target: target, Host: r.host, Kind: manifests.ResourceDir, Key: r.remoteDir, Detail: "the run's directory on the host"},
		{Target: target, Host: r.host, Kind: manifests.ResourceSocket, Key: filepath.Join(r.remoteDir, "sock", "engine.sock")},
		{Target: target, Host: r.host, Kind: manifests.ResourceProcess, Key: marker, Exe: exe},
	} {
		if err := run.Ledger.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{r.local, filepath.Join(r.remoteDir, "bin"), filepath.Join(r.remoteDir, "sock")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tail, err := os.ReadFile("/usr/bin/tail")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		b    []byte
	}{{exe, tail}, {marker, nil}, {filepath.Join(r.remoteDir, "sock", "engine.sock"), nil}} {
		if err := os.WriteFile(f.path, f.b, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The process the ledger names: the copied binary, the marker among
	// its arguments.
	r.proc, _ = startMarked(t, exe, marker)
	return r
}

// startMarked starts exe (a copy of tail) following marker, a file, so
// that its argv names both; it is killed when the test ends. exited is
// closed when it is gone.
func startMarked(t *testing.T, exe, marker string) (cmd *exec.Cmd, exited chan struct{}) {
	t.Helper()
	cmd = exec.Command(exe, "-f", marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	return cmd, exited
}

func (r *remoteRun) gone(t *testing.T, want bool) {
	t.Helper()
	_, err := os.Stat(r.remoteDir)
	if gone := errors.Is(err, fs.ErrNotExist); gone != want {
		t.Errorf("the run's directory on the host: gone %v, want %v (%v)", gone, want, err)
	}
	alive := FindProcs(MarkedBy(r.proc.Path, filepath.Join(r.remoteDir, "state")))
	if (len(alive) == 0) != want {
		t.Errorf("the process on the host: %v, want gone %v", alive, want)
	}
}

// TestTeardownOfAnUnreachableHostIsFinishedLater cuts a fake host off,
// tears the run down (this host's resources go; the host is reported
// with what is left there, and the run directory stays), then brings the
// host back and finishes with a second teardown, which the audit then
// confirms.
func TestTeardownOfAnUnreachableHostIsFinishedLater(t *testing.T) {
	r := newRemoteRun(t)
	ctx := context.Background()
	audit := func() []Resource {
		t.Helper()
		res, err := Audit(ctx, AuditOptions{StateDir: r.state, Run: r.run.ID})
		if err != nil {
			t.Fatal(err)
		}
		return res.Leftovers
	}
	var onHost []string
	for _, l := range audit() {
		if l.Host == r.host {
			onHost = append(onHost, string(l.Kind))
		}
	}
	if strings.Join(onHost, ",") != "dir,socket,process" {
		t.Errorf("the audit over SSH found %v on the host, want its directory, socket and process", onHost)
	}

	r.h.Stop()
	res, err := Teardown(ctx, r.run.Dir, TeardownOptions{Grace: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), r.host+" cannot be reached") || !strings.Contains(err.Error(), "teardown --run "+r.run.ID) {
		t.Fatalf("teardown with the host cut off: %v", err)
	}
	if len(res.Unreachable) != 1 || res.Unreachable[0].Host != r.host || len(res.Unreachable[0].Left) != 3 ||
		res.Unreachable[0].Left[0] != "process "+filepath.Join(r.remoteDir, "state") {
		t.Errorf("unreachable: %+v", res.Unreachable)
	}
	if _, err := os.Stat(r.local); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("this host's directory of the run is still there: %v", err)
	}
	if _, err := os.Stat(r.run.Dir); err != nil {
		t.Fatalf("the run directory went, with resources left on a host: %v", err)
	}
	r.gone(t, false)
	left := audit()
	if len(left) == 0 || !strings.Contains(fmt.Sprint(left), "cannot be reached") {
		t.Errorf("the audit, with the host cut off: %v", left)
	}

	r.h.Restart()
	if res, err = Teardown(ctx, r.run.Dir, TeardownOptions{Grace: 2 * time.Second}); err != nil {
		t.Fatalf("teardown with the host back: %v", err)
	}
	r.gone(t, true)
	if _, err := os.Stat(r.run.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the run directory is still there: %v", err)
	}
	if left := audit(); len(left) != 0 {
		t.Errorf("the audit after teardown: %v", left)
	}
}

// TestTeardownOfAHostIsNotRedone: with one of a run's targets torn down
// on its host and the run kept (its other target's teardown failed), a
// second teardown does not connect to that host again: it may be gone
// for good by then.
func TestTeardownOfAHostIsNotRedone(t *testing.T) {
	r := newRemoteRun(t)
	ctx := context.Background()
	// A local entry whose removal fails keeps the run directory.
	stuck := errors.New("stuck")
	failLocal := func(ctx context.Context, runDir string, e manifests.LedgerEntry) error {
		if e.Key == r.local {
			return stuck
		}
		return RemoveResource(ctx, runDir, e, time.Second)
	}
	if _, err := Teardown(ctx, r.run.Dir, TeardownOptions{Remove: failLocal, Grace: 2 * time.Second}); !errors.Is(err, stuck) {
		t.Fatalf("teardown: %v", err)
	}
	r.gone(t, true)
	hosts, err := ReadHosts(r.run.Dir)
	if err != nil || !hosts[r.host].TornDown {
		t.Fatalf("hosts.json does not say the host is done: %+v %v", hosts, err)
	}
	r.h.Stop()
	if _, err := Teardown(ctx, r.run.Dir, TeardownOptions{Grace: 2 * time.Second}); err != nil {
		t.Fatalf("second teardown, the host done and gone: %v", err)
	}
}

// TestRemotePathOutsideTheRunIsRefused: a ledger names on a host only
// what lies in the run's directory there; teardown touches nothing else.
func TestRemotePathOutsideTheRunIsRefused(t *testing.T) {
	r := newRemoteRun(t)
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.run.Ledger.Record(manifests.LedgerEntry{Target: "docker-h", Host: r.host, Kind: manifests.ResourceDir, Key: outside}); err != nil {
		t.Fatal(err)
	}
	_, err := Teardown(context.Background(), r.run.Dir, TeardownOptions{Grace: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "outside the run's directory on "+r.host) {
		t.Fatalf("teardown: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("a directory outside the run was removed: %v", err)
	}
	r.gone(t, true)
}

// TestEngineResourcesOnARemoteHost: a volume on a fake host's own dockerd
// (a private one, which nothing else sees) is found by the audit and
// removed by teardown through the host's Engine socket forwarded over SSH,
// or, on a host whose sshd forwards no sockets, through `docker system
// dial-stdio` there; the ledger names the Engine as the host sees it.
func TestEngineResourcesOnARemoteHost(t *testing.T) {
	sshtest.Need(t)
	endpoint := testenv.PrivateDockerd(t)
	for _, tc := range []struct {
		name string
		opts []sshtest.Option
	}{
		{"streamlocal", nil},
		{"dial-stdio", []sshtest.Option{sshtest.NoForwarding()}},
	} {
		t.Run(tc.name, func(t *testing.T) { engineOnHost(t, endpoint, tc.opts...) })
	}
}

func engineOnHost(t *testing.T, endpoint string, opts ...sshtest.Option) {
	h := sshtest.Start(t, "127.0.0.2", opts...)
	state, run := newTestRun(t)
	host := fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	if err := RecordHost(run.Dir, HostRecord{Host: host, KnownHosts: h.KnownHosts, Identity: h.ClientKey}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := "sealbench-" + run.ID + "-v"
	labels := map[string]string{manifests.RunLabel: run.ID}
	if err := run.Ledger.Record(manifests.LedgerEntry{Target: "docker-h", Host: host, Kind: manifests.ResourceVolume, Key: name, Engine: endpoint, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	cli, err := engine.NewClient(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	// A volume with the run's label that no ledger names (as a bug would
	// leave it): the audit finds it on the host's Engine all the same.
	orphan := name + "-orphan"
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: orphan, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.VolumeRemove(ctx, orphan, true) })
	held, err := run.Held(ctx, "docker-h")
	if err != nil || len(held) != 1 || held[0].Host != host || held[0].Key != name {
		t.Errorf("Held, over SSH: %+v %v", held, err)
	}
	res, err := Audit(ctx, AuditOptions{StateDir: state, Run: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	found, foundOrphan := false, false
	for _, l := range res.Leftovers {
		found = found || l.Host == host && l.Key == name && l.Detail == "on "+endpoint+" on "+host
		foundOrphan = foundOrphan || l.Host == host && l.Key == orphan && strings.Contains(l.Detail, "labelled "+manifests.RunLabel)
	}
	if !found || !foundOrphan {
		t.Errorf("the audit over SSH does not find the volume (%v) or the labelled one no ledger names (%v): %+v", found, foundOrphan, res.Leftovers)
	}
	if err := cli.VolumeRemove(ctx, orphan, true); err != nil {
		t.Fatal(err)
	}
	if _, err := Teardown(ctx, run.Dir, TeardownOptions{}); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	if _, err := cli.VolumeInspect(ctx, name); !cerrdefs.IsNotFound(err) {
		t.Errorf("the volume is still on the host's dockerd: %v", err)
	}
	if res, err = Audit(ctx, AuditOptions{StateDir: state, Run: run.ID}); err != nil || len(res.Leftovers) != 0 {
		t.Errorf("the audit after teardown: %+v %v", res, err)
	}
	// The forward went with teardown: nothing of it is left in the
	// temporary directory.
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "sealbench-engine-*")); len(left) != 0 {
		t.Errorf("forwarded Engine sockets left: %v", left)
	}
}

// TestTheLedgerOnTheHostIsTornDownFirst: what a runner on the host
// recorded in its own ledger, in the run's directory there, is found by
// the audit and removed by teardown before that directory, over SSH.
func TestTheLedgerOnTheHostIsTornDownFirst(t *testing.T) {
	r := newRemoteRun(t)
	ctx := context.Background()
	l, err := ledger.Create(r.remoteDir, r.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(r.remoteDir, "bin", "tail")
	marker := filepath.Join(r.remoteDir, "sample-1")
	if err := l.Record(manifests.LedgerEntry{Target: "docker-h", Kind: manifests.ResourceProcess, Key: marker, Exe: exe}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, exited := startMarked(t, exe, marker)

	res, err := Audit(ctx, AuditOptions{StateDir: r.state, Run: r.run.ID})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range res.Leftovers {
		found = found || l.Host == r.host && l.Key == marker && l.Kind == manifests.ResourceProcess
	}
	if !found {
		t.Errorf("the audit does not find the process the host's ledger names: %v", res.Leftovers)
	}
	td, err := Teardown(ctx, r.run.Dir, TeardownOptions{Grace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(testenv.Patience):
		t.Errorf("the process the host's ledger names is still running")
	}
	r.gone(t, true)
	if !strings.Contains(strings.Join(td.Removed, "\n"), "process "+marker+" on "+r.host) {
		t.Errorf("teardown does not say it removed the host's process: %v", td.Removed)
	}
}
