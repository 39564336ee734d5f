// Package microsandbox provisions the microsandbox target: one libkrun
// microVM made by microsandbox's `msb` tool, running the Engine API
// stand-in from the Sandbox image. msb can expose a host socket to the
// guest (--vsock) but not a guest socket to the host, so the Engine is
// reached through `msb exec`: a proxy on the host (ServeProxy, run in the
// background by `sealbench msb-proxy`) listens on a unix socket in the run
// directory and hands every connection to
//
//	msb exec <name> --stream -- /opt/sealbench/bin/linux-<arch>/standin dial --socket <guest socket>
//
// as that command's stdin and stdout. It must be --stream: without it
// (with --no-tty, or stdin not a terminal) msb reads stdin to its end
// before it starts the command and prints the output when it has exited
// (exec.rs: should_read_buffered_stdin, run_started), which an HTTP
// conversation never survives. Transport says so, for the run's pins:
// every Engine call pays for one `msb exec`.
//
// What it runs, in order (every command with a deadline, its output kept in
// <run>/microsandbox/logs/):
//
//	msb --version                                        # MinVersion to MaxVersion
//	msb image list --format json                         # has it?
//	msb image inspect <ref> --format json               # under the image's id?
//	msb image load --input <sandbox-image.tar> --quiet
//	msb create --name sealbench-<run>-vm --label sealbench.run=<run> -c N -m MM --no-net <ref>
//	msb exec sealbench-<run>-vm --no-tty -- /bin/sh -c '<standin> serve ... &'
//
// The last runs buffered and returns when the shell exits: the stand-in
// is started with its output in a file and its stdin from /dev/null, so
// nothing holds the exec's pipes, and agentd leaves the shell's
// background children running (crates/agentd/lib/session.rs: the command
// leads a session of its own, signalled as a group only on a kill or a
// failure; ProcessManager.release in process.rs signals nothing).
//
// To take it down: `msb rm --force <name>` (or `--label
// sealbench.run=<run>` for whatever else carries the run's label) and
// `msb image rm --force <ref>`. Inventory and the audit read `msb ls
// --label sealbench.run=<run> --format json`; the audit of every run
// lists all sandboxes (`msb ls --format json`) and asks that for each run
// a name says, because `--label KEY` without a value matches only the
// empty value (ui.rs parse_label; filter_sandbox_ids in
// sdk/rust/lib/backend/local/sandbox/mod.rs), and ls prints no labels.
//
// Every command line and JSON shape was checked against
// superradcompany/microsandbox's sources at the tags v0.6.8 and v0.6.14
// (the newest release when this was written, 2026-08-22; the files read
// did not change between them in what is used here): the flags in
// crates/cli/lib/commands/common.rs (SandboxOpts: --name, -c/--cpus, a
// u8, -m/--memory, parsed by ui.rs parse_size_mib, --label, --no-net,
// which denies all traffic both ways as `--net none` does:
// build_network_policy), create.rs, exec.rs (--no-tty, --stream, the
// command after --), list.rs (--label, repeatable and AND-matched,
// --format json: name, status, created_at, image), remove.rs (names and
// --label, unioned; --force stops it first), image.rs (list, inspect,
// load --input, rm --force and their JSON). Options.AllowUntestedTool lets
// a newer release run, with a warning.
//
// The ledger names the microVM as a vm and the Sandbox image in msb's
// store as an image keyed by its reference, both with msb's path as their
// exe; the package's runs.Backend removes them wherever it is linked
// in.
package microsandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/runs"
)

// Name is the target's name.
const Name = "microsandbox"

// DefaultTool is the tool's name on PATH.
const DefaultTool = "msb"

// MinVersion is the oldest msb this package drives. What it needs came
// earlier (image load --input in v0.5.4; create, ls and rm --label in
// v0.5.5; exec --stream in v0.5.10), but its sources were checked from
// v0.6.8, the first release with today's listing (#1232).
var MinVersion = toolexec.MustVersion("0.6.8")

// MaxVersion is the newest msb whose sources this package was checked
// against: v0.6.14. A newer one is refused unless
// Options.AllowUntestedTool.
var MaxVersion = toolexec.MustVersion("0.6.14")

// Transport is how the host reaches the Engine in the microVM, as the
// run's pins record it.
const Transport = "msb-exec"

// Paths inside the microVM: the bundle is in the image at /opt/sealbench;
// the stand-in makes only its socket's own directory, so that lies in /tmp.
const (
	GuestSocket = "/tmp/sealbench-sock/standin.sock"
	GuestState  = "/var/lib/sealbench/standin"
	GuestLog    = "/tmp/sealbench-standin.log"
)

// Errors Check answers, wrapped with the details.
var (
	ErrToolMissing  = errors.New("microsandbox's msb tool is not installed")
	ErrToolTooOld   = errors.New("microsandbox's msb tool is too old")
	ErrToolUntested = errors.New("microsandbox's msb tool is newer than the releases sealbench was checked against")
)

// ProxySubcommand is the hidden sealbench command that runs ServeProxy
// with ParseProxyArgs' flags.
const ProxySubcommand = "msb-proxy"

// getMsb is how microsandbox's README (v0.6.14) installs msb on macOS
// and Linux.
const getMsb = "`curl -fsSL https://install.microsandbox.dev | sh`"

// spec is the tool this package drives.
var spec = toolexec.Spec{Default: DefaultTool, Min: MinVersion, Max: MaxVersion,
	Checked: "superradcompany/microsandbox's sources at v0.6.8 and v0.6.14",
	Install: "install it with " + getMsb, Upgrade: "upgrade with " + getMsb,
	ErrMissing: ErrToolMissing, ErrTooOld: ErrToolTooOld, ErrUntested: ErrToolUntested}

var _ provision.Target = (*Microsandbox)(nil)

// Options configures the microsandbox target: what every VM target
// takes, and how to start the Engine proxy.
type Options struct {
	vmtarget.Options
	// ProxyCommand starts the Engine proxy: an absolute binary and the
	// arguments before ProxyConfig.Args (default: this executable and
	// ProxySubcommand, that is `sealbench msb-proxy`).
	ProxyCommand []string
}

// Microsandbox is one msb microVM running the stand-in.
type Microsandbox struct {
	vm    *vmtarget.VM
	proxy []string // Options.ProxyCommand
	logp  string   // the proxy's log
	// exited is closed when the proxy this process started exits.
	exited chan struct{}
}

// New returns the microsandbox target of o.Run. It creates nothing.
func New(o Options) (*Microsandbox, error) {
	vm, err := vmtarget.New(vmtarget.Config{Target: Name, What: "the microVM", Spec: spec, MaxCPUs: 255,
		Options: o.Options})
	if err != nil {
		return nil, err
	}
	proxy, err := vmtarget.HelperCommand(Name, "Engine proxy", o.ProxyCommand, ProxySubcommand)
	if err != nil {
		return nil, err
	}
	return &Microsandbox{vm: vm, proxy: proxy, logp: filepath.Join(vm.Dir, "proxy.log")}, nil
}

func (m *Microsandbox) Name() string     { return Name }
func (m *Microsandbox) Endpoint() string { return m.vm.Endpoint() }

// VMName is the sandbox's name: sealbench-<run>-vm.
func (m *Microsandbox) VMName() string { return m.vm.Name }

// Transport is how the Engine is reached: always Transport.
func (m *Microsandbox) Transport() string { return Transport }

// Proxy is the configuration of this target's Engine proxy.
func (m *Microsandbox) Proxy() ProxyConfig {
	tool := m.vm.C.Tool
	if m.vm.Tool != nil {
		tool = m.vm.Tool.Path
	}
	return ProxyConfig{Socket: m.vm.Sock, Tool: tool, Name: m.vm.Name, Standin: vmtarget.GuestStandin(m.vm.C.Arch), GuestSocket: GuestSocket}
}

func (m *Microsandbox) proxyRunning() bool {
	return len(runs.FindProcs(runs.MarkedBy(m.proxy[0], m.vm.Sock))) > 0
}

// up reports whether our microVM exists, the proxy runs, and the stand-in
// answers through it.
func (m *Microsandbox) up(ctx context.Context) bool {
	if m.vm.Tool == nil || !m.proxyRunning() {
		return false
	}
	s, err := findSandbox(ctx, m.vm.Tool, m.vm.C.Run.ID, m.vm.Name)
	if err != nil || s == nil {
		return false
	}
	return engine.Ping(ctx, m.Endpoint(), 10*time.Second) == nil
}

// Create checks the tool, loads the Sandbox image into it, creates the
// microVM, starts the stand-in in it and the Engine proxy beside it; when
// all that is up and answers already, it does nothing.
func (m *Microsandbox) Create(ctx context.Context) error {
	vm := m.vm
	if err := vm.ResolveTool(); err != nil {
		return err
	}
	if m.up(ctx) {
		return nil
	}
	t := vm.Tool
	if _, err := vm.CheckVersion(ctx); err != nil {
		return err
	}
	if err := vm.MakeDirs(); err != nil {
		return err
	}
	if err := m.loadImage(ctx); err != nil {
		return err
	}
	if err := vm.RecordVM("the microVM running the stand-in"); err != nil {
		return err
	}
	if s, err := findSandbox(ctx, t, vm.C.Run.ID, vm.Name); err != nil {
		return err
	} else if s != nil {
		vm.C.Log("%s is there but does not answer: removing it to start again", vm.Name)
		if _, err := t.Run(ctx, "rm", "--force", vm.Name); err != nil {
			return err
		}
	}
	if _, err := t.Run(ctx, "create", "--name", vm.Name, "--label", manifests.RunLabel+"="+vm.C.Run.ID,
		"-c", strconv.Itoa(vm.C.CPUs), "-m", strconv.FormatInt(vm.C.MemoryBytes>>20, 10)+"M", "--no-net", vm.C.Image.Ref); err != nil {
		return fmt.Errorf("creating the microVM: %w", err)
	}
	// The stand-in runs in the background inside; its output goes to a
	// file there, so that this exec returns at once.
	script := fmt.Sprintf("%s serve --socket %s --state %s >%s 2>&1 </dev/null &", vmtarget.GuestStandin(vm.C.Arch), GuestSocket, GuestState, GuestLog)
	if _, err := t.Run(ctx, "exec", vm.Name, "--no-tty", "--", "/bin/sh", "-c", script); err != nil {
		return fmt.Errorf("starting the stand-in in the microVM: %w", err)
	}
	if err := vm.Record(manifests.LedgerEntry{Kind: manifests.ResourceSocket, Key: vm.Sock, Detail: "the Engine proxy's socket"}); err != nil {
		return err
	}
	if err := m.startProxy(); err != nil {
		return err
	}
	vm.C.Log("started microVM %s and the Engine proxy, waiting for %s", vm.Name, m.Endpoint())
	return vm.WaitReady(ctx, 5*time.Second, m.proxyAlive, m.logs)
}

// loadImage loads the Sandbox image into msb, unless msb has it under its
// ref already; either way msb must then have it under the image's id.
func (m *Microsandbox) loadImage(ctx context.Context) error {
	img := m.vm.C.Image
	var id string
	present := func(ctx context.Context) (bool, error) {
		var err error
		id, err = imageID(ctx, m.vm.Tool, img.Ref)
		return id != "", err
	}
	args := func(context.Context) ([]string, error) {
		return []string{"image", "load", "--input", img.Tar, "--quiet"}, nil
	}
	if err := m.vm.LoadImage(ctx, present, args); err != nil {
		return err
	}
	if id != img.ID.String() {
		return fmt.Errorf("msb has image %s as %q, not the Sandbox image %s: remove it (`msb image rm %s`) or seal again", img.Ref, id, img.ID, img.Ref)
	}
	return nil
}

// startProxy starts the Engine proxy in the background, in a session of
// its own: it outlives this process, as the target does.
func (m *Microsandbox) startProxy() error {
	if m.proxyRunning() {
		return nil
	}
	if err := m.vm.Record(manifests.LedgerEntry{Kind: manifests.ResourceProcess, Key: m.vm.Sock, Exe: m.proxy[0], Detail: "the Engine proxy (msb exec)"}); err != nil {
		return err
	}
	exited, err := vmtarget.StartBackground(append(append([]string(nil), m.proxy...), m.Proxy().Args()...), m.vm.Dir, m.logp)
	if err != nil {
		return fmt.Errorf("the Engine proxy: %w", err)
	}
	m.exited = exited
	return nil
}

// proxyAlive is nil while the Engine proxy runs. The one this process
// started is watched directly: until it has exec'd, /proc does not show
// it as the proxy yet.
func (m *Microsandbox) proxyAlive(context.Context) error {
	if !vmtarget.Running(m.exited, m.proxyRunning) {
		return fmt.Errorf("the Engine proxy exited; its log, %s:\n%s", m.logp, vmtarget.Tail(m.logp, 2000))
	}
	return nil
}

// logs are the proxy's log and the stand-in's, for an error.
func (m *Microsandbox) logs(ctx context.Context) string {
	guest := "(none)"
	out, err := m.vm.Tool.Run(ctx, "exec", m.vm.Name, "--no-tty", "--", "/bin/sh", "-c", "tail -c 2000 "+GuestLog)
	if err != nil {
		guest = "(none: " + err.Error() + ")"
	} else {
		guest = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("the proxy's log, %s:\n%s\nthe stand-in's log:\n%s", m.logp, vmtarget.Tail(m.logp, 2000), guest)
}

// InstallImage loads img into the stand-in inside the microVM.
func (m *Microsandbox) InstallImage(ctx context.Context, img engine.Image) error {
	return m.vm.InstallImage(ctx, img)
}

// Identity asks the stand-in inside the microVM: the kernel, CPUs and
// memory are the microVM's.
func (m *Microsandbox) Identity(ctx context.Context) (*engine.Identity, error) {
	id, err := m.vm.Identity(ctx)
	if err != nil {
		return nil, err
	}
	id.Transport = Transport
	return id, nil
}

// Destroy tears down every ledger entry of the target, then whatever msb
// still holds with the run's label (`msb rm --force --label`): both steps
// run, and every failure is returned.
func (m *Microsandbox) Destroy(ctx context.Context) error {
	run := m.vm.C.Run.ID
	return m.vm.Destroy(ctx, func(ctx context.Context, t *toolexec.Tool) error {
		ss, err := listSandboxes(ctx, t, run)
		if err != nil || len(ss) == 0 {
			return err
		}
		_, err = t.Run(ctx, "rm", "--force", "--label", manifests.RunLabel+"="+run)
		return err
	})
}

// Inventory lists what of the run the target holds: ledger entries whose
// resource still exists, and sandboxes labelled with the run.
func (m *Microsandbox) Inventory(ctx context.Context) ([]runs.Resource, error) {
	return m.vm.Inventory(ctx, func(ctx context.Context, t *toolexec.Tool) ([]runs.Resource, error) {
		ss, err := listSandboxes(ctx, t, m.vm.C.Run.ID)
		var out []runs.Resource
		for _, s := range ss {
			out = append(out, runs.Resource{Kind: manifests.ResourceVM, Key: s.Name, Detail: s.Status})
		}
		return out, err
	})
}
