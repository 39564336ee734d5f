// Package provisiontest is the conformance suite every provision.Target
// passes: a map of named tests (go-fuse posixtest style), each on a fresh
// run, against the real backend.
package provisiontest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
)

// Suite says how to make the Target under test.
type Suite struct {
	// New returns the Target for run; it must create nothing yet.
	New func(t *testing.T, run *provision.Run) provision.Target
	// Image is a Sandbox image to install (its Cmd may be anything; the
	// suite runs `sh -c`).
	Image provision.Image
	// Engine is what Identity must say serves the Engine API.
	Engine string
}

// Tests are the conformance tests, by name.
var Tests = map[string]func(t *testing.T, s *Suite){
	"CreateTwiceChangesNothing":     createTwice,
	"DestroyAbsentIsNil":            destroyAbsent,
	"InstallImage":                  installImage,
	"Identity":                      identity,
	"SandboxHasFUSEAndNoNetwork":    sandbox,
	"DestroyLeavesNothing":          destroyLeavesNothing,
	"EverythingHeldIsInTheLedger":   ledgerNamesAll,
	"TeardownOfTheRunLeavesNothing": teardownRun,
	"CreateAfterDestroyWorksAgain":  createAfterDestroy,
	"InstallMissingTarFailsClean":   installMissingTar,
	"EndpointIsAnEngineAPIEndpoint": endpoint,
}

// Run runs every test of the suite, in name order.
func Run(t *testing.T, s *Suite) {
	names := make([]string, 0, len(Tests))
	for n := range Tests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) { Tests[n](t, s) })
	}
}

// env is one test's run and target.
type env struct {
	state  string
	run    *provision.Run
	target provision.Target
	ctx    context.Context
}

func newEnv(t *testing.T, s *Suite) *env {
	t.Helper()
	// A short path: the stand-in's socket lives under it.
	state, err := os.MkdirTemp("", "sbt-")
	if err != nil {
		t.Fatal(err)
	}
	run, err := provision.NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e := &env{state: state, run: run, target: s.New(t, run), ctx: ctx}
	t.Cleanup(func() {
		defer cancel()
		defer os.RemoveAll(state)
		run.Close()
		if _, err := provision.Teardown(context.Background(), run.Dir, provision.TeardownOptions{}); err != nil {
			t.Errorf("cleanup: teardown: %v", err)
		}
	})
	return e
}

func (e *env) must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s (%s): %v", what, e.target.Name(), err)
	}
}

func (e *env) inventory(t *testing.T) []string {
	t.Helper()
	rs, err := e.target.Inventory(e.ctx)
	e.must(t, "Inventory", err)
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

func createTwice(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
	before, ledgerBefore, ep := e.inventory(t), len(e.run.Ledger.Entries()), e.target.Endpoint()
	e.must(t, "Create on an existing target", e.target.Create(e.ctx))
	e.must(t, "InstallImage again", e.target.InstallImage(e.ctx, s.Image))
	after := e.inventory(t)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("a second Create changed the target:\nbefore:\n  %s\nafter:\n  %s", strings.Join(before, "\n  "), strings.Join(after, "\n  "))
	}
	if n := len(e.run.Ledger.Entries()); n != ledgerBefore {
		t.Errorf("a second Create recorded %d more ledger entries", n-ledgerBefore)
	}
	if e.target.Endpoint() != ep {
		t.Errorf("endpoint changed from %s to %s", ep, e.target.Endpoint())
	}
}

func destroyAbsent(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Destroy before Create", e.target.Destroy(e.ctx))
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "Destroy", e.target.Destroy(e.ctx))
	e.must(t, "Destroy again", e.target.Destroy(e.ctx))
}

func installImage(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
	cli, err := provision.NewClient(e.target.Endpoint())
	e.must(t, "client", err)
	defer cli.Close()
	got, err := cli.ImageInspect(e.ctx, s.Image.ID.String())
	e.must(t, "ImageInspect", err)
	if got.ID != s.Image.ID.String() {
		t.Errorf("image id %s, want %s", got.ID, s.Image.ID)
	}
	found := false
	for _, en := range e.run.Ledger.Entries() {
		if en.Kind == manifests.ResourceImage && en.Key == s.Image.ID.String() && en.Engine == e.target.Endpoint() {
			found = true
		}
	}
	if !found {
		t.Errorf("the image is not in the ledger: %+v", e.run.Ledger.Entries())
	}
	bad := s.Image
	bad.ID = manifests.DigestOf([]byte("not this image"))
	if err := e.target.InstallImage(e.ctx, bad); err == nil || !strings.Contains(err.Error(), bad.ID.String()) {
		t.Errorf("installing a tar under the wrong id: %v, want an error naming the id", err)
	}
}

func identity(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	id, err := e.target.Identity(e.ctx)
	e.must(t, "Identity", err)
	if id.Engine != s.Engine || id.Target != e.target.Name() || id.Endpoint != e.target.Endpoint() {
		t.Errorf("identity %+v: want engine %s, target %s, endpoint %s", id, s.Engine, e.target.Name(), e.target.Endpoint())
	}
	if id.Kernel == "" || id.CPUs < 1 || id.MemoryBytes < 1<<20 || id.EngineVersion == "" {
		t.Errorf("identity lacks kernel, CPUs, memory or engine version: %+v", id)
	}
}

// startSandbox creates and starts a Sandbox running script, and leaves it.
func startSandbox(t *testing.T, e *env, s *Suite, name, script string) {
	t.Helper()
	cli, err := provision.NewClient(e.target.Endpoint())
	e.must(t, "client", err)
	defer cli.Close()
	id, err := provision.CreateSandbox(e.ctx, e.run, e.target.Name(), e.target.Endpoint(), cli, s.Image, name, []string{"sh", "-c", script})
	e.must(t, "CreateSandbox", err)
	e.must(t, "ContainerStart", cli.ContainerStart(e.ctx, id, container.StartOptions{}))
}

// runSandbox runs script in a new Sandbox and returns its exit code and output.
func runSandbox(t *testing.T, e *env, s *Suite, name, script string) (int64, string) {
	t.Helper()
	cli, err := provision.NewClient(e.target.Endpoint())
	e.must(t, "client", err)
	defer cli.Close()
	id, err := provision.CreateSandbox(e.ctx, e.run, e.target.Name(), e.target.Endpoint(), cli, s.Image, name, []string{"sh", "-c", script})
	e.must(t, "CreateSandbox", err)
	insp, err := cli.ContainerInspect(e.ctx, id)
	e.must(t, "ContainerInspect", err)
	if insp.Config.Labels[manifests.RunLabel] != e.run.ID {
		t.Errorf("Sandbox labels %v, want %s=%s", insp.Config.Labels, manifests.RunLabel, e.run.ID)
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

func sandbox(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
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

func destroyLeavesNothing(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
	startSandbox(t, e, s, "left", "sleep 600")
	if len(e.inventory(t)) == 0 {
		t.Fatal("Inventory is empty while the target is up")
	}
	e.must(t, "Destroy", e.target.Destroy(e.ctx))
	if inv := e.inventory(t); len(inv) > 0 {
		t.Errorf("after Destroy the target still holds:\n  %s", strings.Join(inv, "\n  "))
	}
}

func ledgerNamesAll(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
	runSandbox(t, e, s, "named", "true")
	rs, err := e.target.Inventory(e.ctx)
	e.must(t, "Inventory", err)
	inLedger := map[string]bool{}
	for _, en := range e.run.Ledger.Entries() {
		inLedger[string(en.Kind)+" "+en.Key] = true
	}
	for _, r := range rs {
		if !inLedger[string(r.Kind)+" "+r.Key] {
			t.Errorf("the target holds %s, which the ledger does not name", r)
		}
	}
}

func teardownRun(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
	startSandbox(t, e, s, "td", "sleep 600")
	for i := range 2 {
		if _, err := provision.Teardown(e.ctx, e.run.Dir, provision.TeardownOptions{}); err != nil {
			t.Fatalf("teardown #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(e.run.Dir); !os.IsNotExist(err) {
		t.Errorf("the run directory is still there after teardown: %v", err)
	}
	res, err := provision.Audit(e.ctx, provision.AuditOptions{StateDir: e.state, Targets: []string{e.target.Name()}})
	e.must(t, "Audit", err)
	var mine []string
	for _, r := range res.Leftovers {
		if r.Run == e.run.ID || strings.HasPrefix(r.Key, e.state) {
			mine = append(mine, r.String())
		}
	}
	if len(mine) > 0 {
		t.Errorf("audit after teardown finds:\n  %s", strings.Join(mine, "\n  "))
	}
}

func createAfterDestroy(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	e.must(t, "Destroy", e.target.Destroy(e.ctx))
	e.must(t, "Create after Destroy", e.target.Create(e.ctx))
	e.must(t, "InstallImage", e.target.InstallImage(e.ctx, s.Image))
	if _, err := e.target.Identity(e.ctx); err != nil {
		t.Errorf("Identity after re-create: %v", err)
	}
}

func installMissingTar(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	bad := s.Image
	bad.Tar = bad.Tar + ".missing"
	bad.ID = manifests.DigestOf([]byte(fmt.Sprint("missing ", time.Now().UnixNano())))
	e.must(t, "Create", e.target.Create(e.ctx))
	if err := e.target.InstallImage(e.ctx, bad); err == nil || !strings.Contains(err.Error(), ".missing") {
		t.Errorf("installing a missing tar: %v, want an error naming it", err)
	}
}

func endpoint(t *testing.T, s *Suite) {
	e := newEnv(t, s)
	e.must(t, "Create", e.target.Create(e.ctx))
	ep := e.target.Endpoint()
	if !strings.HasPrefix(ep, "unix:///") && !strings.HasPrefix(ep, "tcp://") {
		t.Fatalf("endpoint %q is not unix:///... or tcp://...", ep)
	}
	cli, err := provision.NewClient(ep)
	e.must(t, "client", err)
	defer cli.Close()
	if _, err := cli.Ping(e.ctx); err != nil {
		t.Errorf("ping %s: %v", ep, err)
	}
}
