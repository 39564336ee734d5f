// Package provisiontest is the conformance suite every provision.Target
// passes, against the real backend: named tests (go-fuse posixtest
// style) that share one target, so that a VM target boots twice for the
// whole suite rather than once per test.
//
// The suite makes one run and its target, checks that Destroy before
// Create is nil, creates it and installs the image; then every test of
// Shared runs on that target, in name order (each leaves it up, with the
// image), then the target's own tests of Suite.WhileUp; then the steps of
// Lifecycle run in their order, each starting
// from what the one before left: Destroy leaves nothing, Create works
// again after it (the second boot), and the run's teardown leaves nothing
// the audit finds.
package provisiontest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// Suite says how to make the Target under test.
type Suite struct {
	// New returns the Target for run; it must create nothing yet.
	New func(t *testing.T, run *runs.Run) provision.Target
	// Image is a Sandbox image to install (its Cmd may be anything; the
	// suite runs `sh -c`).
	Image engine.Image
	// Engine is what Identity must say serves the Engine API.
	Engine string
	// Timeout bounds each test and each step (default 3 minutes); a VM
	// target booting under emulation needs more.
	Timeout time.Duration
	// Host is, for a target on a remote host, the ssh://USER@HOST:PORT
	// its ledger entries name; they name the Engine as that host sees it,
	// never the Endpoint forwarded here (docs/design/remote-hosts.md).
	Host string
	// WhileUp are more tests, by name, that run on the suite's target
	// after the Shared ones, before the Lifecycle steps: a test that needs
	// the target up (a VM's twelve cells) shares the suite's boot rather
	// than booting one of its own. Each leaves the target up.
	WhileUp map[string]Test
	// Gone, when set, checks after DestroyLeavesNothing's Destroy what
	// only this kind of target could leave (a VM's directory on the host).
	Gone func(t *testing.T, target provision.Target)
}

// A Test runs on the suite's target, up with the image installed, and
// leaves it so.
type Test func(t *testing.T, e *Env, s *Suite)

// Shared are the tests that run on the one target, by name.
var Shared = map[string]Test{
	"CreateTwiceChangesNothing":     createTwice,
	"InstallImage":                  installImage,
	"Identity":                      identity,
	"SandboxHasFUSEAndNoNetwork":    sandbox,
	"EverythingHeldIsInTheLedger":   ledgerNamesAll,
	"InstallMissingTarFailsClean":   installMissingTar,
	"EndpointIsAnEngineAPIEndpoint": endpoint,
	"SandboxExecIsConfined":         execConfined,
}

// Lifecycle are the steps after the shared tests, in order; each starts
// from the state the one before left.
var Lifecycle = []struct {
	Name string
	Step Test
}{
	{"DestroyLeavesNothing", destroyLeavesNothing},
	{"CreateAfterDestroyWorksAgain", createAfterDestroy},
	{"TeardownOfTheRunLeavesNothing", teardownRun},
}

// Run runs the suite: the setup, every Shared test in name order, then
// s.WhileUp's in theirs, then the Lifecycle steps in their order.
func Run(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	if !e.step(t, "DestroyBeforeCreateIsNil", s, func(t *testing.T, e *Env, s *Suite) {
		e.must(t, "Destroy before Create", e.Target.Destroy(e.ctx))
		e.must(t, "Create", e.Target.Create(e.ctx))
		e.must(t, "InstallImage", e.Target.InstallImage(e.ctx, s.Image))
	}) {
		t.Fatal("the target could not be created: the other tests need it")
	}
	names := make([]string, 0, len(Shared))
	for n := range Shared {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.step(t, n, s, Shared[n])
	}
	names = names[:0]
	for n := range s.WhileUp {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.step(t, n, s, s.WhileUp[n])
	}
	for _, l := range Lifecycle {
		e.step(t, l.Name, s, l.Step)
	}
}

// Env is the suite's run and target; ctx is the current test's.
type Env struct {
	State  string // the run's state directory
	Run    *runs.Run
	Target provision.Target
	ctx    context.Context
}

func newEnv(t *testing.T, s *Suite) *Env {
	t.Helper()
	run, state := NewRun(t)
	return &Env{State: state, Run: run, Target: s.New(t, run)}
}

// NewRun is a run in a state directory of the test's own (a short path:
// sockets live under it), which is torn down and removed when the test
// ends; it returns the run and the state directory.
func NewRun(t testing.TB) (*runs.Run, string) {
	t.Helper()
	state := testenv.ShortTempDir(t, "sbt-")
	run, err := runs.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run.Close()
		if _, err := runs.Teardown(context.Background(), run.Dir, runs.TeardownOptions{}); err != nil {
			t.Errorf("cleanup: teardown: %v", err)
		}
	})
	return run, state
}

// createSandbox records and creates a Sandbox as the runner does: with
// the OCI runtime the target's Identity names (runsc on gvisor), which
// the Engine's default would silently replace.
func (e *Env) createSandbox(t *testing.T, cli client.APIClient, s *Suite, name string, cmd []string) (string, error) {
	t.Helper()
	id := e.identity(t)
	return engine.CreateSandbox(e.ctx, cli, e.Run.Ledger, engine.Sandbox{RunID: e.Run.ID, Target: e.Target.Name(), Endpoint: e.Target.Endpoint(),
		Runtime: id.Runtime, GVisor: id.FUSE == manifests.FUSEGVisor, Image: s.Image.ID, Name: name, Cmd: cmd})
}

// identity is the target's Identity: the OCI runtime its Sandboxes run
// with (empty: the Engine's default), and whether it is gVisor's.
func (e *Env) identity(t *testing.T) *engine.Identity {
	t.Helper()
	id, err := e.Target.Identity(e.ctx)
	e.must(t, "Identity (for the Sandboxes' runtime)", err)
	return id
}

// step runs one test as a subtest under the suite's timeout and says
// whether it passed.
func (e *Env) step(t *testing.T, name string, s *Suite, f Test) bool {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	return t.Run(name, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		e.ctx = ctx
		f(t, e, s)
	})
}

// dial returns a client of the target's Engine; the caller closes it.
func (e *Env) dial(t *testing.T) *client.Client {
	t.Helper()
	cli, err := engine.NewClient(e.Target.Endpoint())
	e.must(t, "client", err)
	return cli
}

func (e *Env) must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s (%s): %v", what, e.Target.Name(), err)
	}
}

func (e *Env) inventory(t *testing.T) []string {
	t.Helper()
	rs, err := e.Target.Inventory(e.ctx)
	e.must(t, "Inventory", err)
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

func createTwice(t *testing.T, e *Env, s *Suite) {
	before, ledgerBefore, ep := e.inventory(t), len(e.Run.Ledger.Entries()), e.Target.Endpoint()
	e.must(t, "Create on an existing target", e.Target.Create(e.ctx))
	e.must(t, "InstallImage again", e.Target.InstallImage(e.ctx, s.Image))
	after := e.inventory(t)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("a second Create changed the target:\nbefore:\n  %s\nafter:\n  %s", strings.Join(before, "\n  "), strings.Join(after, "\n  "))
	}
	if n := len(e.Run.Ledger.Entries()); n != ledgerBefore {
		t.Errorf("a second Create recorded %d more ledger entries", n-ledgerBefore)
	}
	if e.Target.Endpoint() != ep {
		t.Errorf("endpoint changed from %s to %s", ep, e.Target.Endpoint())
	}
}

func installImage(t *testing.T, e *Env, s *Suite) {
	cli := e.dial(t)
	defer cli.Close()
	got, err := cli.ImageInspect(e.ctx, s.Image.ID.String())
	e.must(t, "ImageInspect", err)
	if got.ID != s.Image.ID.String() {
		t.Errorf("image id %s, want %s", got.ID, s.Image.ID)
	}
	found := false
	for _, en := range e.Run.Ledger.Entries() {
		if en.Kind != manifests.ResourceImage || en.Key != s.Image.ID.String() {
			continue
		}
		switch {
		case s.Host == "" && en.Host == "" && en.Engine == e.Target.Endpoint():
			found = true
		case s.Host != "" && en.Host == s.Host && en.Engine != "" && en.Engine != e.Target.Endpoint():
			found = true
		default:
			t.Errorf("the image is recorded as %+v: want host %q and the Engine as it sees it (%s here)", en, s.Host, e.Target.Endpoint())
		}
	}
	if !found {
		t.Errorf("the image is not in the ledger: %+v", e.Run.Ledger.Entries())
	}
	bad := s.Image
	bad.ID = manifests.DigestOf([]byte("not this image"))
	if err := e.Target.InstallImage(e.ctx, bad); err == nil || !strings.Contains(err.Error(), bad.ID.String()) {
		t.Errorf("installing a tar under the wrong id: %v, want an error naming the id", err)
	}
}

func identity(t *testing.T, e *Env, s *Suite) {
	id, err := e.Target.Identity(e.ctx)
	e.must(t, "Identity", err)
	if id.Engine != s.Engine || id.Name != e.Target.Name() || id.Endpoint != e.Target.Endpoint() {
		t.Errorf("identity %+v: want engine %s, target %s, endpoint %s", id, s.Engine, e.Target.Name(), e.Target.Endpoint())
	}
	if id.Kernel == "" || id.CPUs < 1 || id.MemoryBytes < 1<<20 || id.EngineVersion == "" {
		t.Errorf("identity lacks kernel, CPUs, memory or engine version: %+v", id)
	}
}

// startSandbox creates and starts a Sandbox running script, and leaves it.
func startSandbox(t *testing.T, e *Env, s *Suite, name, script string) {
	t.Helper()
	cli := e.dial(t)
	defer cli.Close()
	id, err := e.createSandbox(t, cli, s, name, []string{"sh", "-c", script})
	e.must(t, "CreateSandbox", err)
	e.must(t, "ContainerStart", cli.ContainerStart(e.ctx, id, container.StartOptions{}))
}

// runSandbox runs script in a new Sandbox and returns its exit code and output.
func runSandbox(t *testing.T, e *Env, s *Suite, name, script string) (int64, string) {
	t.Helper()
	cli := e.dial(t)
	defer cli.Close()
	id, err := e.createSandbox(t, cli, s, name, []string{"sh", "-c", script})
	e.must(t, "CreateSandbox", err)
	insp, err := cli.ContainerInspect(e.ctx, id)
	e.must(t, "ContainerInspect", err)
	if insp.Config.Labels[manifests.RunLabel] != e.Run.ID {
		t.Errorf("Sandbox labels %v, want %s=%s", insp.Config.Labels, manifests.RunLabel, e.Run.ID)
	}
	if want := e.identity(t).Runtime; want != "" && insp.HostConfig.Runtime != want {
		t.Errorf("Sandbox runs with runtime %q, want the target's %q", insp.HostConfig.Runtime, want)
	}
	e.must(t, "ContainerStart", cli.ContainerStart(e.ctx, id, container.StartOptions{}))
	waitC, errC := cli.ContainerWait(e.ctx, id, container.WaitConditionNotRunning)
	var code int64
	select {
	case r := <-waitC:
		code = r.StatusCode
	case err := <-errC:
		e.must(t, "ContainerWait", err)
	}
	logs, err := cli.ContainerLogs(e.ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	e.must(t, "ContainerLogs", err)
	defer logs.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := logs.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return code, b.String()
}

func sandbox(t *testing.T, e *Env, s *Suite) {
	// /dev/fuse is there; the only network interface is loopback.
	code, out := runSandbox(t, e, s, "probe", `test -c /dev/fuse || { echo no /dev/fuse; exit 3; }; ls /sys/class/net; echo ok`)
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("Sandbox exited %d:\n%s", code, out)
	}
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "eth") || strings.HasPrefix(f, "docker") {
			t.Errorf("Sandbox has a network interface %s:\n%s", f, out)
		}
	}
}

func destroyLeavesNothing(t *testing.T, e *Env, s *Suite) {
	startSandbox(t, e, s, "left", "sleep 600")
	if len(e.inventory(t)) == 0 {
		t.Fatal("Inventory is empty while the target is up")
	}
	e.must(t, "Destroy", e.Target.Destroy(e.ctx))
	if inv := e.inventory(t); len(inv) > 0 {
		t.Errorf("after Destroy the target still holds:\n  %s", strings.Join(inv, "\n  "))
	}
	if s.Gone != nil {
		s.Gone(t, e.Target)
	}
	e.must(t, "Destroy again", e.Target.Destroy(e.ctx))
}

func ledgerNamesAll(t *testing.T, e *Env, s *Suite) {
	runSandbox(t, e, s, "named", "true")
	rs, err := e.Target.Inventory(e.ctx)
	e.must(t, "Inventory", err)
	inLedger := map[string]bool{}
	for _, en := range e.Run.Ledger.Entries() {
		inLedger[string(en.Kind)+" "+en.Key] = true
	}
	for _, r := range rs {
		if !inLedger[string(r.Kind)+" "+r.Key] {
			t.Errorf("the target holds %s, which the ledger does not name", r)
		}
	}
}

func teardownRun(t *testing.T, e *Env, s *Suite) {
	startSandbox(t, e, s, "td", "sleep 600")
	for i := range 2 {
		if _, err := runs.Teardown(e.ctx, e.Run.Dir, runs.TeardownOptions{}); err != nil {
			t.Fatalf("teardown #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(e.Run.Dir); !os.IsNotExist(err) {
		t.Errorf("the run directory is still there after teardown: %v", err)
	}
	res, err := runs.Audit(e.ctx, runs.AuditOptions{StateDir: e.State, Targets: []string{e.Target.Name()}})
	e.must(t, "Audit", err)
	var mine []string
	for _, r := range res.Leftovers {
		if r.Run == e.Run.ID || strings.HasPrefix(r.Key, e.State) {
			mine = append(mine, r.String())
		}
	}
	if len(mine) > 0 {
		t.Errorf("audit after teardown finds:\n  %s", strings.Join(mine, "\n  "))
	}
}

// createAfterDestroy follows destroyLeavesNothing: a second Destroy is
// nil, and the target comes up again.
func createAfterDestroy(t *testing.T, e *Env, s *Suite) {
	e.must(t, "Destroy of a destroyed target", e.Target.Destroy(e.ctx))
	e.must(t, "Create after Destroy", e.Target.Create(e.ctx))
	e.must(t, "InstallImage", e.Target.InstallImage(e.ctx, s.Image))
	if _, err := e.Target.Identity(e.ctx); err != nil {
		t.Errorf("Identity after re-create: %v", err)
	}
}

func installMissingTar(t *testing.T, e *Env, s *Suite) {
	bad := s.Image
	bad.Tar = bad.Tar + ".missing"
	bad.ID = manifests.DigestOf([]byte(fmt.Sprint("missing ", time.Now().UnixNano())))
	if err := e.Target.InstallImage(e.ctx, bad); err == nil || !strings.Contains(err.Error(), ".missing") {
		t.Errorf("installing a missing tar: %v, want an error naming it", err)
	}
}

func endpoint(t *testing.T, e *Env, s *Suite) {
	ep := e.Target.Endpoint()
	if !strings.HasPrefix(ep, "unix:///") && !strings.HasPrefix(ep, "tcp://") {
		t.Fatalf("endpoint %q is not unix:///... or tcp://...", ep)
	}
	cli := e.dial(t)
	defer cli.Close()
	if _, err := cli.Ping(e.ctx); err != nil {
		t.Errorf("ping %s: %v", ep, err)
	}
}

// ForwardAnswers runs the `ssh -L` command a target on another host
// printed (forward), with ssh the ssh binary and opts its options in
// front of the printed arguments, and waits until the Engine at endpoint
// answers through it with the image id; then it stops the forward. host
// names the host in a failure.
func ForwardAnswers(t testing.TB, ssh string, opts []string, forward, endpoint, image, host string) {
	t.Helper()
	fwd := exec.Command(ssh, append(opts, strings.Fields(forward)[1:]...)...)
	fwd.Stderr = os.Stderr
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { fwd.Process.Kill(); fwd.Wait() }()
	cli, err := engine.NewClient(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	testenv.Eventually(t, "the stand-in on "+host+" answering through the printed forward", 200*time.Millisecond, func() bool {
		_, err := cli.ImageInspect(context.Background(), image)
		return err == nil
	})
}

// confinedScript tries, as a cell body would, to get out of its Sandbox,
// and prints one "ESCAPED ..." line for each attempt that worked. It uses
// only the shell and busybox applets (the Sandbox image has no grep, sed
// or awk), and ends with "checks done" so that a script that died early
// is not mistaken for a confined one.
const confinedScript = `
fail() { echo "ESCAPED: $*"; }
[ "$(busybox id -u):$(busybox id -g)" = 65534:65534 ] || fail "runs as $(busybox id), not 65534:65534"
while read -r k v; do
	case "$k" in
	NoNewPrivs:) [ "$v" = 1 ] || fail "NoNewPrivs is $v in /proc/self/status: a setuid or file-capability binary would gain privileges" ;;
	CapInh:|CapPrm:|CapEff:|CapAmb:) [ "$v" = 0000000000000000 ] || fail "$k $v: holds capabilities" ;;
	esac
done </proc/self/status
busybox mount -t tmpfs escape /tmp 2>/dev/null && fail "mounted a tmpfs on /tmp"
for f in -U -m -n -i -u -C -p; do
	busybox unshare $f true 2>/dev/null && fail "unshare $f: made a new namespace"
done
busybox hostname escaped 2>/dev/null && fail "set the hostname"
busybox kill -9 1 2>/dev/null && fail "killed the Sandbox's pid 1"
( echo escaped >/proc/sys/kernel/hostname ) 2>/dev/null && fail "wrote /proc/sys/kernel/hostname"
out=$(busybox traceroute -n -m 1 -w 1 127.0.0.1 2>&1)
case "$out" in *"socket: Operation not permitted"*) ;; *) fail "raw IP socket (traceroute): $out" ;; esac
out=$(busybox arping -c 1 -w 1 -I lo 127.0.0.1 2>&1)
case "$out" in *"socket"*"Operation not permitted"*) ;; *) fail "packet socket (arping): $out" ;; esac
for a in 192.0.2.1 10.0.0.1 172.17.0.1 8.8.8.8; do
	busybox nc -w 2 $a 80 </dev/null >/dev/null 2>&1 && fail "connected to $a:80"
done
for i in /sys/class/net/*; do
	[ -e "$i" ] || continue # no /sys/class/net at all: gVisor's Sentry has none
	case "$i" in */lo) ;; *) fail "network interface $i" ;; esac
done
for p in / /bin /etc /opt/sealbench /opt/sealbench/bin; do
	[ -d "$p" ] || continue
	( echo x >"$p/.escape" ) 2>/dev/null && fail "created a file in $p"
	busybox touch "$p" 2>/dev/null && fail "changed the times of $p"
done
for f in /bin/busybox /bin/sh /etc/passwd /opt/sealbench/SHA256SUMS /opt/sealbench/manifest.json; do
	[ -e "$f" ] || continue
	( echo x >>"$f" ) 2>/dev/null && fail "appended to $f"
	busybox chmod 0777 "$f" 2>/dev/null && fail "changed the mode of $f"
	busybox mv "$f" "$f.moved" 2>/dev/null && fail "renamed $f"
	busybox rm "$f" 2>/dev/null && fail "removed $f"
done
n=0
for p in /proc/[0-9]*; do n=$((n+1)); done
[ "$n" -le 8 ] || fail "sees $n processes: the host's, not only the Sandbox's"
for n in 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 63 64 100 255 256; do
	[ -e /proc/self/fd/$n ] && fail "fd $n is open: $(busybox readlink /proc/self/fd/$n)"
done
for n in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
	( cd /proc/self/fd/$n 2>/dev/null ) && fail "cd through /proc/self/fd/$n"
done
echo "checks done"
`

// execConfined: an exec as the cell bodies run (uid 65534, not
// privileged; runner.BodyUser) in a Sandbox made as every Sandbox is
// (CAP_SYS_ADMIN and /dev/fuse granted to the container, for layerfsd)
// cannot gain capabilities, mount, unshare, open raw sockets, reach
// another address, write the image's files, see other processes, or get
// out through an inherited descriptor; NoNewPrivs is 1.
func execConfined(t *testing.T, e *Env, s *Suite) {
	cli := e.dial(t)
	defer cli.Close()
	id, err := e.createSandbox(t, cli, s, "confined", []string{"sleep", "600"})
	e.must(t, "CreateSandbox", err)
	e.must(t, "ContainerStart", cli.ContainerStart(e.ctx, id, container.StartOptions{}))
	created, err := cli.ContainerExecCreate(e.ctx, id, container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", confinedScript}, User: "65534:65534",
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, AttachStdout: true, AttachStderr: true,
	})
	e.must(t, "ContainerExecCreate", err)
	hr, err := cli.ContainerExecAttach(e.ctx, created.ID, container.ExecAttachOptions{})
	e.must(t, "ContainerExecAttach", err)
	var stdout, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&stdout, &stderr, hr.Reader)
	hr.Close()
	e.must(t, "reading the exec's output", err)
	insp, err := cli.ContainerExecInspect(e.ctx, created.ID)
	e.must(t, "ContainerExecInspect", err)
	if insp.ExitCode != 0 || !strings.Contains(stdout.String(), "checks done") {
		t.Fatalf("the escape attempts did not run to the end: exit %d\nstdout:\n%s\nstderr:\n%s", insp.ExitCode, &stdout, &stderr)
	}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if what, ok := strings.CutPrefix(l, "ESCAPED: "); ok {
			t.Errorf("%s: an exec as uid 65534 %s", e.Target.Name(), what)
		}
	}
}
