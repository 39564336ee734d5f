package apple_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/toolexec/faketool"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/apple"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/provision/internal/vmtest"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

func TestMain(m *testing.M) {
	faketool.Main() // run as the fake `container`, this binary is only that
	provisiontest.Main(m)
}

func fakeTool(t *testing.T, opt string) string { return vmtest.FakeTool(t, faketool.Container, opt) }

func newApple(t *testing.T, run *runs.Run, img engine.Image, mod ...func(*apple.Options)) *apple.Apple {
	t.Helper()
	o := apple.Options{Options: vmtarget.Options{Run: run, Image: img, CPUs: 2, MemoryBytes: 1 << 30, ReadyTimeout: 30 * time.Second, Log: t.Logf}}
	for _, m := range mod {
		m(&o)
	}
	a, err := apple.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// target is the apple target under test, with the fake `container`.
var target = vmtest.Target{Name: apple.Name, Tool: faketool.Container,
	New: func(t *testing.T, run *runs.Run, img engine.Image) provision.Target {
		return newApple(t, run, img)
	}}

// TestConformance runs the suite against the fake tool, whose VM init
// is the real stand-in from the test bundle.
func TestConformance(t *testing.T) { target.Conformance(t) }

// TestCommandLines: what Create and Destroy run, argument for argument,
// and what the ledger records.
func TestCommandLines(t *testing.T) {
	testenv.NeedRoot(t)
	e := target.Setup(t)
	a, run, img := e.Target.(*apple.Apple), e.Run, e.Bundle.Image
	ctx := context.Background()
	if err := a.Create(ctx); err != nil {
		t.Fatal(err)
	}
	tool := vmtest.ToolPath(t, "container")
	dir := filepath.Join(run.Dir, "apple")
	sock := filepath.Join(dir, "sock", "engine.sock")
	vmtest.WantLedger(t, run, apple.Name,
		"dir "+dir,
		"image "+img.Ref+" exe="+tool,
		"vm "+a.VMName()+" exe="+tool+" sealbench.run="+run.ID,
		"socket "+sock)
	if err := a.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	oci := filepath.Join(dir, apple.OCIArchive)
	if _, err := os.Stat(oci); !os.IsNotExist(err) {
		t.Errorf("the OCI archive of the Sandbox image is still there once loaded: %v", err)
	}
	vmtest.WantRan(t, e.Fake,
		[]string{"container", "--version"},
		[]string{"container", "system", "status"},
		[]string{"container", "image", "load", "--input", oci},
		[]string{"container", "run", "--detach", "--name", a.VMName(), "--label", "sealbench.run=" + run.ID, "--cpus", "2", "--memory", "1024M",
			"--network", "none", "--cap-add", "ALL", "--publish-socket", sock + ":/tmp/sealbench-sock/standin.sock", img.Ref,
			vmtarget.GuestStandin(runtime.GOARCH), "serve", "--socket", "/tmp/sealbench-sock/standin.sock", "--state", "/var/lib/sealbench/standin"},
		[]string{"container", "delete", "--force", a.VMName()},
		[]string{"container", "image", "delete", img.Ref})
	for _, c := range vmtest.Calls(t, e.Fake) {
		if slices.Contains(c, "list") && !(slices.Contains(c, "--format") && slices.Contains(c, "json")) {
			t.Errorf("listed without --format json: %q", c)
		}
	}
	// Logs of every command are kept in the run directory until teardown;
	// Destroy left only the run's own directory.
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the apple directory is still there after Destroy: %v", err)
	}
}

// TestFailedRunRollsBack: `container run` fails; the error names the
// command and the tool's message, and teardown of the run leaves nothing
// in the tool: the image it loaded goes too, found by the Inventory
// before as an image the tool holds.
func TestFailedRunRollsBack(t *testing.T) {
	b := provisiontest.GetBundle(t)
	target.FailedCreateRollsBack(t, "container run", "run --detach", []string{"container", "image", "delete", b.Image.Ref})
}

// TestCheck: a missing tool, a tool too old, a stopped service, each a
// clear error; StartSystem starts the service.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	t.Run("missing", func(t *testing.T) {
		img := provisiontest.GetBundle(t).Image // before PATH loses go
		t.Setenv("PATH", t.TempDir())
		err := apple.Check(ctx, "")
		if !errors.Is(err, apple.ErrToolMissing) || !strings.Contains(err.Error(), "github.com/apple/container/releases") {
			t.Errorf("Check without the tool: %v", err)
		}
		run, _ := provisiontest.NewRun(t)
		a := newApple(t, run, img)
		if err := a.Create(ctx); !errors.Is(err, apple.ErrToolMissing) {
			t.Errorf("Create without the tool: %v", err)
		}
		if err := a.Destroy(ctx); err != nil {
			t.Errorf("Destroy of a target never created, without the tool: %v", err)
		}
		res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: t.TempDir(), Targets: []string{apple.Name}})
		if err != nil || len(res.Notes) == 0 {
			t.Errorf("audit without the tool: %v, notes %v; want a note", err, res)
		}
	})
	t.Run("too old", func(t *testing.T) {
		fakeTool(t, t.TempDir())
		t.Setenv(faketool.VersionEnv, "0.12.3")
		err := apple.Check(ctx, "")
		if !errors.Is(err, apple.ErrToolTooOld) || !strings.Contains(err.Error(), "is 0.12.3, sealbench needs 1.0.0 or newer") ||
			!strings.Contains(err.Error(), "1.0.0 to 1.2.2, checked against apple/container's sources at 1.0.0 and 1.2.2") {
			t.Errorf("Check with 0.12.3: %v", err)
		}
	})
	t.Run("in range", func(t *testing.T) {
		fakeTool(t, t.TempDir())
		for _, v := range []string{"1.0.0", "1.2.2"} {
			t.Setenv(faketool.VersionEnv, v)
			if err := apple.Check(ctx, ""); err != nil {
				t.Errorf("Check with %s: %v", v, err)
			}
		}
	})
	t.Run("newer refused", func(t *testing.T) {
		fk := fakeTool(t, t.TempDir())
		t.Setenv(faketool.VersionEnv, "1.3.0")
		err := apple.Check(ctx, "")
		if !errors.Is(err, apple.ErrToolUntested) || !strings.Contains(err.Error(), "is 1.3.0, newer than the releases sealbench drives (1.0.0 to 1.2.2") ||
			!strings.Contains(err.Error(), "--allow-untested-tool") {
			t.Errorf("Check with 1.3.0: %v", err)
		}
		run, _ := provisiontest.NewRun(t)
		a := newApple(t, run, provisiontest.GetBundle(t).Image)
		if err := a.Create(ctx); !errors.Is(err, apple.ErrToolUntested) {
			t.Errorf("Create with 1.3.0: %v", err)
		}
		if calls := vmtest.Calls(t, fk); vmtest.Ran(calls, "container", "system", "status") {
			t.Errorf("Create went on past the refusal; ran:\n%s", vmtest.Render(calls))
		}
	})
	t.Run("newer allowed", func(t *testing.T) {
		fk := fakeTool(t, t.TempDir())
		t.Setenv(faketool.VersionEnv, "1.3.0")
		var logged []string
		run, _ := provisiontest.NewRun(t)
		a := newApple(t, run, provisiontest.GetBundle(t).Image, func(o *apple.Options) {
			o.AllowUntestedTool = true
			o.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
		})
		// The fake's image /opt/sealbench is empty, so the VM's init
		// fails; what matters is that Create got past the version.
		a.Create(ctx)
		if calls := vmtest.Calls(t, fk); !vmtest.Ran(calls, "container", "system", "status") {
			t.Errorf("Create stopped at the version; ran:\n%s", vmtest.Render(calls))
		}
		if !slices.ContainsFunc(logged, func(l string) bool {
			return strings.HasPrefix(l, "warning: ") && strings.Contains(l, "is 1.3.0, newer than the releases sealbench drives (1.0.0 to 1.2.2") &&
				strings.Contains(l, "going on because of --allow-untested-tool")
		}) {
			t.Errorf("no warning naming the range; logged:\n%s", strings.Join(logged, "\n"))
		}
		runs.Teardown(ctx, run.Dir, runs.TeardownOptions{})
	})
	t.Run("not running", func(t *testing.T) {
		fk := fakeTool(t, t.TempDir())
		if err := faketool.StopSystem(fk); err != nil {
			t.Fatal(err)
		}
		err := apple.Check(ctx, "")
		if !errors.Is(err, apple.ErrNotRunning) || !strings.Contains(err.Error(), "container system start") {
			t.Errorf("Check with the service stopped: %v", err)
		}
		res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: t.TempDir(), Targets: []string{apple.Name}})
		if err != nil || len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, " "), "not running") {
			t.Errorf("audit with the service stopped: %v, %+v; want a note", err, res)
		}
		run, _ := provisiontest.NewRun(t)
		a := newApple(t, run, provisiontest.GetBundle(t).Image, func(o *apple.Options) { o.StartSystem = true })
		// It starts the service, then fails at the load (the tar is
		// there, but the fake's OPT is empty, so nothing runs): what
		// matters is that it got past the check.
		err = a.Create(ctx)
		if calls := vmtest.Calls(t, fk); !vmtest.Ran(calls, "container", "system", "start", "--enable-kernel-install") {
			t.Errorf("StartSystem did not start the service (Create: %v); ran:\n%s", err, vmtest.Render(calls))
		}
		runs.Teardown(ctx, run.Dir, runs.TeardownOptions{})
	})
}

// TestAuditAndFixFindLabelledVMs: a VM whose run lost its ledger is found
// by its label, and --fix removes it with its anonymous volume.
func TestAuditAndFixFindLabelledVMs(t *testing.T) {
	testenv.NeedRoot(t)
	t.Setenv(faketool.AnonEnv, "1")
	e := target.Setup(t)
	a := e.Target.(*apple.Apple)
	if err := a.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	target.LoseRunThenFix(t, e, a.VMName())
	calls := vmtest.Calls(t, e.Fake)
	if !slices.ContainsFunc(calls, func(c []string) bool {
		return len(c) == 4 && c[1] == "volume" && c[2] == "delete"
	}) {
		t.Errorf("the anonymous volume was not deleted; ran:\n%s", vmtest.Render(calls))
	}
	if out, err := exec.Command("container", "volume", "list", "--format", "json").Output(); err != nil || string(out) != "[]\n" {
		t.Errorf("volumes left: %s, %v", out, err)
	}
}

// TestNamedVolumeStays: a volume a VM mounts that is not anonymous (no
// com.apple.container.resource.anonymous label) is not the run's to
// delete with the VM.
func TestNamedVolumeStays(t *testing.T) {
	fk := fakeTool(t, t.TempDir())
	run, _ := provisiontest.NewRun(t)
	ctx := context.Background()
	if out, err := exec.Command("container", "volume", "create", "data-1").CombinedOutput(); err != nil {
		t.Fatalf("container volume create: %v: %s", err, out)
	}
	a := newApple(t, run, provisiontest.GetBundle(t).Image)
	if err := a.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := vmtest.Calls(t, fk); slices.ContainsFunc(calls, func(c []string) bool { return slices.Contains(c, "delete") }) {
		t.Errorf("deleted something; ran:\n%s", vmtest.Render(calls))
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	run, _ := provisiontest.NewRun(t)
	good := engine.Image{Tar: "/x.tar", Ref: "r:t", ID: manifests.DigestOf([]byte("x"))}
	long := &runs.Run{ID: strings.Repeat("r", 51), Dir: run.Dir, Ledger: run.Ledger} // sealbench-<51>-vm is 64 characters
	for name, o := range map[string]vmtarget.Options{
		"long name":  {Run: long, Image: good},
		"no run":     {Image: good},
		"no image":   {Run: run},
		"no tar":     {Run: run, Image: engine.Image{Ref: "r:t", ID: good.ID}},
		"zero cpus":  {Run: run, Image: good, CPUs: -1},
		"tiny":       {Run: run, Image: good, MemoryBytes: 1 << 20},
		"no ref set": {Run: run, Image: engine.Image{Tar: "/x.tar", ID: good.ID}},
	} {
		if _, err := apple.New(apple.Options{Options: o}); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

// TestAuditAndFixFindLabelledVolumes: a volume carrying the run label is
// a volume to the audit, and --fix deletes it with the tool on PATH (no
// ledger names it, so no exe does).
func TestAuditAndFixFindLabelledVolumes(t *testing.T) {
	fk := fakeTool(t, t.TempDir())
	run, state := provisiontest.NewRun(t)
	ctx := context.Background()
	out, err := exec.Command("container", "volume", "create", "--label", manifests.RunLabel+"="+run.ID, "data-1").CombinedOutput()
	if err != nil {
		t.Fatalf("container volume create: %v: %s", err, out)
	}
	opts := runs.AuditOptions{StateDir: state, Targets: []string{apple.Name}}
	res, err := runs.Audit(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := runs.Resource{Target: apple.Name, Run: run.ID, Kind: manifests.ResourceVolume, Key: "data-1", Detail: "a container volume labelled sealbench.run"}
	if !slices.Contains(res.Leftovers, want) {
		t.Fatalf("audit: %+v; want %+v among the leftovers", res.Leftovers, want)
	}
	after, err := runs.Fix(ctx, opts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Leftovers) > 0 {
		t.Errorf("after --fix: %v", after.Leftovers)
	}
	vmtest.WantRan(t, fk, []string{"container", "volume", "delete", "data-1"})
}

// TestNewTakesTheLongestName: a name of 63 characters, the most the tool
// takes, is accepted.
func TestNewTakesTheLongestName(t *testing.T) {
	run, _ := provisiontest.NewRun(t)
	img := engine.Image{Tar: "/x.tar", Ref: "r:t", ID: manifests.DigestOf([]byte("x"))}
	r := &runs.Run{ID: strings.Repeat("r", 50), Dir: run.Dir, Ledger: run.Ledger}
	a, err := apple.New(apple.Options{Options: vmtarget.Options{Run: r, Image: img}})
	if err != nil || len(a.VMName()) != 63 {
		t.Errorf("New with a run id of 50: %v", err)
	}
}
