package microsandbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/toolexec/faketool"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/provision/internal/vmtest"
	"github.com/sealbench/sealbench/provision/microsandbox"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

func TestMain(m *testing.M) {
	faketool.Main() // run as the fake `msb`, this binary is only that
	vmtest.Main(m)  // or as `sealbench msb-proxy`
}

func fakeTool(t *testing.T, opt string) string { return vmtest.FakeTool(t, faketool.Msb, opt) }

func newMsb(t *testing.T, run *runs.Run, img engine.Image) *microsandbox.Microsandbox {
	t.Helper()
	m, err := microsandbox.New(microsandbox.Options{Options: vmtarget.Options{Run: run, Image: img, CPUs: 2, MemoryBytes: 1 << 30,
		ReadyTimeout: 30 * time.Second, Log: t.Logf}, ProxyCommand: []string{vmtest.Self(t), microsandbox.ProxySubcommand}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// target is the microsandbox target under test, with the fake msb.
var target = vmtest.Target{Name: microsandbox.Name, Tool: faketool.Msb,
	New: func(t *testing.T, run *runs.Run, img engine.Image) provision.Target {
		return newMsb(t, run, img)
	}}

// TestConformance: the suite through the fake msb, whose exec runs the
// real stand-in from the test bundle, reached through the Engine proxy.
func TestConformance(t *testing.T) { target.Conformance(t) }

// proxies lists the Engine proxies of m still running.
func proxies(t *testing.T, m *microsandbox.Microsandbox) []runs.Proc {
	return runs.FindProcs(runs.MarkedBy(vmtest.Self(t), m.Proxy().Socket))
}

// TestCommandLines: what Create and Destroy run, argument for argument,
// and what the ledger records.
func TestCommandLines(t *testing.T) {
	testenv.NeedRoot(t)
	e := target.Setup(t)
	m, run, img := e.Target.(*microsandbox.Microsandbox), e.Run, e.Bundle.Image
	ctx := context.Background()
	if err := m.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Transport() != microsandbox.Transport {
		t.Errorf("transport %q", m.Transport())
	}
	tool := vmtest.ToolPath(t, "msb")
	dir := filepath.Join(run.Dir, "microsandbox")
	sock := filepath.Join(dir, "sock", "engine.sock")
	vmtest.WantLedger(t, run, microsandbox.Name,
		"dir "+dir,
		"image "+img.Ref+" exe="+tool,
		"vm "+m.VMName()+" exe="+tool+" sealbench.run="+run.ID,
		"socket "+sock,
		"process "+sock+" exe="+vmtest.Self(t))
	if got := m.Proxy(); got.Tool != tool || got.Socket != sock {
		t.Errorf("the proxy runs %s on %s; want %s on %s", got.Tool, got.Socket, tool, sock)
	}
	if err := m.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	vmtest.WantRan(t, e.Fake,
		[]string{"msb", "--version"},
		[]string{"msb", "image", "load", "--input", img.Tar, "--quiet"},
		[]string{"msb", "image", "inspect", img.Ref, "--format", "json"},
		[]string{"msb", "create", "--name", m.VMName(), "--label", "sealbench.run=" + run.ID, "-c", "2", "-m", "1024M", "--no-net", img.Ref},
		[]string{"msb", "exec", m.VMName(), "--stream", "--", m.Proxy().Standin, "dial", "--socket", "/tmp/sealbench-sock/standin.sock"},
		[]string{"msb", "ls", "--label", "sealbench.run=" + run.ID, "--format", "json"},
		[]string{"msb", "rm", "--force", m.VMName()},
		[]string{"msb", "image", "rm", "--force", img.Ref})
	if ps := proxies(t, m); len(ps) > 0 {
		t.Errorf("the proxy still runs after Destroy: %v", ps)
	}
}

// TestFailedCreateRollsBack: `msb create` fails mid-provisioning; the
// error names the command and the tool's message; teardown leaves
// nothing, the loaded image included.
func TestFailedCreateRollsBack(t *testing.T) {
	b := provisiontest.GetBundle(t)
	target.FailedCreateRollsBack(t, "msb create", "create --name", []string{"msb", "image", "rm", "--force", b.Image.Ref})
}

// TestAuditFindsLabelledLeftovers: a microVM whose run directory went is
// found by its label, and --fix removes it.
func TestAuditFindsLabelledLeftovers(t *testing.T) {
	testenv.NeedRoot(t)
	e := target.Setup(t)
	m := e.Target.(*microsandbox.Microsandbox)
	ctx := context.Background()
	if err := m.Create(ctx); err != nil {
		t.Fatal(err)
	}
	// Stop the proxy as teardown would, then lose the run directory.
	for _, p := range proxies(t, m) {
		runs.Kill(ctx, p, runs.MarkedBy(vmtest.Self(t), m.Proxy().Socket), 5*time.Second)
	}
	target.LoseRunThenFix(t, e, m.VMName())
}

// TestCheck: missing, too old, in range, and newer than the range
// checked: refused, or with AllowUntestedTool a warning naming the range.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	img := provisiontest.GetBundle(t).Image // before PATH loses go
	t.Setenv("PATH", t.TempDir())
	if err := microsandbox.Check(ctx, ""); !errors.Is(err, microsandbox.ErrToolMissing) {
		t.Errorf("Check without msb: %v", err)
	}
	fk := fakeTool(t, t.TempDir())
	const rng = "0.6.8 to 0.6.14, checked against superradcompany/microsandbox's sources at v0.6.8 and v0.6.14"
	t.Setenv(faketool.VersionEnv, "0.6.7")
	if err := microsandbox.Check(ctx, ""); !errors.Is(err, microsandbox.ErrToolTooOld) || !strings.Contains(err.Error(), "is 0.6.7, sealbench needs 0.6.8 or newer (it drives "+rng+")") {
		t.Errorf("Check with msb 0.6.7: %v", err)
	}
	for _, v := range []string{"0.6.8", "0.6.14", ""} {
		t.Setenv(faketool.VersionEnv, v)
		if err := microsandbox.Check(ctx, ""); err != nil {
			t.Errorf("Check with msb %q: %v", v, err)
		}
	}
	t.Setenv(faketool.VersionEnv, "0.7.0")
	if err := microsandbox.Check(ctx, ""); !errors.Is(err, microsandbox.ErrToolUntested) ||
		!strings.Contains(err.Error(), "is 0.7.0, newer than the releases sealbench drives ("+rng+"); pass --allow-untested-tool") {
		t.Errorf("Check with msb 0.7.0: %v", err)
	}
	run, _ := provisiontest.NewRun(t)
	if err := newMsb(t, run, img).Create(ctx); !errors.Is(err, microsandbox.ErrToolUntested) {
		t.Errorf("Create with msb 0.7.0: %v", err)
	}
	if calls := vmtest.Calls(t, fk); vmtest.Ran(calls, "msb", "image", "list", "--format", "json") {
		t.Errorf("Create went on past the refusal; ran:\n%s", vmtest.Render(calls))
	}
	var logged []string
	m, err := microsandbox.New(microsandbox.Options{Options: vmtarget.Options{Run: run, Image: img, ReadyTimeout: time.Second, AllowUntestedTool: true,
		Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}, ProxyCommand: []string{vmtest.Self(t), microsandbox.ProxySubcommand}})
	if err != nil {
		t.Fatal(err)
	}
	m.Create(ctx) // the fake's image /opt/sealbench is empty: it goes no further than the stand-in
	if calls := vmtest.Calls(t, fk); !vmtest.Ran(calls, "msb", "image", "list", "--format", "json") {
		t.Errorf("Create with AllowUntestedTool stopped at the version; ran:\n%s", vmtest.Render(calls))
	}
	if !slices.ContainsFunc(logged, func(l string) bool {
		return strings.HasPrefix(l, "warning: ") && strings.Contains(l, "is 0.7.0, newer than the releases sealbench drives ("+rng+"): going on because of --allow-untested-tool")
	}) {
		t.Errorf("no warning naming the range; logged:\n%s", strings.Join(logged, "\n"))
	}
	runs.Teardown(ctx, run.Dir, runs.TeardownOptions{})
}

func TestProxyArgsRoundTrip(t *testing.T) {
	c := microsandbox.ProxyConfig{Socket: "/r/sock/engine.sock", Tool: "/usr/local/bin/msb", Name: "sealbench-x-vm", Standin: "/opt/sealbench/bin/linux-arm64/standin", GuestSocket: "/tmp/s/standin.sock"}
	got, err := microsandbox.ParseProxyArgs(c.Args())
	if err != nil || got != c {
		t.Errorf("ParseProxyArgs(Args()) = %+v, %v; want %+v", got, err, c)
	}
	for _, bad := range [][]string{nil, {"--socket", "rel", "--tool", "/t", "--name", "n", "--standin", "/s", "--guest-socket", "/g"}, append(c.Args(), "extra")} {
		if _, err := microsandbox.ParseProxyArgs(bad); err == nil {
			t.Errorf("ParseProxyArgs(%q) accepted", bad)
		}
	}
}

// TestDoctorOnLinux: the doctor asks the msb installed (the fake, as
// 0.6.10, the last release built for glibc 2.39, then as 0.6.14) and says
// whether this host's glibc runs it, and so whether microsandbox can run
// here. On Debian 12 (glibc 2.36) it cannot with 0.6.10, and says why.
func TestDoctorOnLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the msb-kvm and msb-glibc checks are Linux's")
	}
	host, err := microsandbox.HostGlibc(context.Background())
	if err != nil {
		t.Skipf("not a glibc host: %v", err)
	}
	fakeTool(t, t.TempDir())
	for _, c := range []struct {
		msb   string
		floor microsandbox.GlibcVersion
	}{{"0.6.10", microsandbox.GlibcVersion{Major: 2, Minor: 39}}, {"0.6.14", microsandbox.GlibcVersion{Major: 2, Minor: 28}}} {
		t.Setenv(faketool.VersionEnv, c.msb)
		r := provision.Doctor(context.Background())
		i := slices.IndexFunc(r.Checks, func(ch provision.Check) bool { return ch.Name == microsandbox.GlibcCheckName })
		if i < 0 {
			t.Fatalf("no %s check: %+v", microsandbox.GlibcCheckName, r.Checks)
		}
		g := r.Checks[i]
		want := !host.Less(c.floor)
		if g.OK != want || !strings.Contains(g.Detail, "glibc "+host.String()) || !strings.Contains(g.Detail, "msb "+c.msb+" needs") {
			t.Errorf("msb %s on glibc %s: %+v; want ok %v", c.msb, host, g, want)
		}
		if !want && !strings.Contains(g.Detail, "needs glibc "+c.floor.String()+" or newer") {
			t.Errorf("msb %s on glibc %s: the check does not say why: %s", c.msb, host, g.Detail)
		}
		j := slices.IndexFunc(r.Targets, func(tr provision.TargetReadiness) bool { return tr.Target == microsandbox.Name })
		if j < 0 || !slices.Contains(r.Targets[j].Needs, microsandbox.GlibcCheckName) || !slices.Contains(r.Targets[j].Needs, microsandbox.KVMCheckName) {
			t.Fatalf("microsandbox's readiness: %+v", r.Targets)
		}
		if !want && r.Targets[j].Ready {
			t.Errorf("msb %s on glibc %s: microsandbox is ready", c.msb, host)
		}
	}
}
