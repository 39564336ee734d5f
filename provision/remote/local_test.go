package remote_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// fakeLocalHost is a fake host whose sessions' SEALBENCH_STATE_DIR is a
// directory of the test's own (short: the stand-in's socket is in it),
// and a function making the local@ssh target of a run there.
type fakeLocalHost struct {
	h     *sshtest.Host
	host  string // ssh://root@127.0.0.N:PORT
	state string // the host's state directory
	b     *provisiontest.Bundle
}

func startLocalHost(t *testing.T, addr string, opts ...sshtest.Option) *fakeLocalHost {
	t.Helper()
	sshtest.Need(t)
	b := provisiontest.GetBundle(t)
	state := testenv.ShortTempDir(t, "sb-host-")
	h := sshtest.Start(t, addr, append(opts, sshtest.SetEnv(runs.StateDirEnv, state))...)
	return &fakeLocalHost{h: h, host: fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port), state: state, b: b}
}

// target records the host in run's hosts.json, connects, and returns the
// run's local@ssh target there.
func (f *fakeLocalHost) target(t *testing.T, run *runs.Run) *remote.Local {
	t.Helper()
	if err := runs.RecordHost(run.Dir, runs.HostRecord{Host: f.host, KnownHosts: f.h.KnownHosts, Identity: f.h.ClientKey}); err != nil {
		t.Fatal(err)
	}
	c, err := sshx.Dial(context.Background(), f.h.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l, err := remote.NewLocal(provision.RemoteOptions{NewOptions: provision.NewOptions{Run: run, Bundle: f.b.Dir, Manifest: f.b.Manifest, BundleName: f.b.Name, Name: "local-h", Log: t.Logf},
		Host: f.host, SSH: c})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLocalOverSSHConformance runs the conformance suite on local@ssh: the
// bundle's stand-in, copied to and checked on a fake host, run there as
// root and reached through the forward of its socket; its ledger names
// the host, and the Engine as the host sees it.
func TestLocalOverSSHConformance(t *testing.T) {
	f := startLocalHost(t, "127.0.0.3")
	provisiontest.Run(t, &provisiontest.Suite{
		New:    func(t *testing.T, run *runs.Run) provision.Target { return f.target(t, run) },
		Image:  f.b.Image,
		Engine: manifests.EngineStandin,
		Host:   f.host,
	})
	if left, _ := filepath.Glob(filepath.Join(f.state, "remote", "*")); len(left) > 0 {
		t.Errorf("the host's state directory still holds %v", left)
	}
}

// TestLocalOverSSHWithoutForwarding: on a host whose sshd forwards no
// sockets, the stand-in's Engine is reached through `standin dial` there.
func TestLocalOverSSHWithoutForwarding(t *testing.T) {
	f := startLocalHost(t, "127.0.0.4", sshtest.NoForwarding())
	run, _ := provisiontest.NewRun(t)
	l := f.target(t, run)
	ctx := context.Background()
	if err := l.Create(ctx); err != nil {
		t.Fatalf("Create: %v", err)
	}
	id, err := l.Identity(ctx)
	if err != nil || id.Transport != remote.TransportSSH || id.Engine != manifests.EngineStandin {
		t.Errorf("Identity: %+v %v, want the stand-in over ssh", id, err)
	}
	if err := l.Destroy(ctx); err != nil {
		t.Errorf("Destroy: %v", err)
	}
	if _, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{}); err != nil {
		t.Errorf("teardown: %v", err)
	}
}

// TestKilledRemoteStandinTornDownLater: a stand-in on a host killed with
// SIGKILL (a run that died with it) leaves its Sandbox's init, its state
// and its socket there; the run's teardown, later, removes them all over
// SSH.
func TestKilledRemoteStandinTornDownLater(t *testing.T) {
	f := startLocalHost(t, "127.0.0.5")
	run, _ := provisiontest.NewRun(t)
	l := f.target(t, run)
	ctx := context.Background()
	if err := l.Create(ctx); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := l.InstallImage(ctx, f.b.Image); err != nil {
		t.Fatalf("InstallImage: %v", err)
	}
	cli, err := engine.NewClient(l.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cid, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: l.Name(), Endpoint: l.Endpoint(), Image: f.b.Image.ID, Name: "left", Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, cid, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	hostRun := runs.HostRunDir(f.state, run.ID, f.host)
	standin := filepath.Join(hostRun, "local-h", "bundle", "bin", "linux-"+arch(), "standin")
	marker := filepath.Join(hostRun, "local-h", "state")
	inits := func() []runs.Proc {
		return runs.FindProcs(func(argv []string) bool {
			return len(argv) >= 2 && argv[0] == "standin-sandbox-init" && strings.HasPrefix(argv[1], marker+"/")
		})
	}
	if len(inits()) == 0 {
		t.Fatal("no Sandbox init runs on the host for the Sandbox started")
	}
	killed := 0
	for _, p := range runs.FindProcs(runs.MarkedBy(standin, marker)) {
		syscall.Kill(p.Pid, syscall.SIGKILL)
		killed++
	}
	if killed != 1 {
		t.Fatalf("found %d stand-ins running %s with marker %s on the host, want 1", killed, standin, marker)
	}
	// A Sandbox's init leaves when its stand-in's control socket closes;
	// one that does not (stuck, say) is found by its argv: this one stays.
	stuck := exec.Command("bash", "-c", `exec -a standin-sandbox-init sleep 600 "$1"`, "bash", filepath.Join(marker, "containers", "stuck", "rootfs"))
	stuck.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- stuck.Wait() }()
	defer stuck.Process.Kill()
	// What a later `sealbench teardown --run ID` does.
	res, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{Grace: time.Second})
	if err != nil {
		t.Fatalf("teardown: %v", err)
	}
	removed := strings.Join(res.Removed, "\n")
	for _, want := range []string{"stateDir " + marker + " on " + f.host, "process " + marker + " on " + f.host} {
		if !strings.Contains(removed, want) {
			t.Errorf("teardown removed:\n%s\nwant %s", removed, want)
		}
	}
	select {
	case <-waited:
	case <-time.After(testenv.Patience):
		t.Errorf("the Sandbox init left on the host is still running after teardown")
	}
	for deadline := time.Now().Add(testenv.Patience); len(inits()) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if ps := inits(); len(ps) > 0 {
		t.Errorf("a Sandbox init %v is still running on the host", ps[0])
	}
	if _, err := os.Stat(hostRun); !os.IsNotExist(err) {
		t.Errorf("the run's directory on the host is still there: %v", err)
	}
}

func arch() string { return runtime.GOARCH }
