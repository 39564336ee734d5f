// Package vmtarget holds what the targets that run the stand-in in a VM
// made by a command-line tool (provision/apple, provision/microsandbox)
// share: the run's directory for the target and its Engine socket, the
// ledger entries for the tool's VM and image, loading the Sandbox image
// into the tool, waiting for the stand-in, the Engine-side methods of a
// provision.Target, and a runs.Backend (Backend) that dispatches the
// tool's resources by kind; and, for those with a background helper (the
// microsandbox Engine proxy, the qemu link), its command line and its
// private socket; and the size of a VM booted from the VM image (Size:
// the lima and qemu targets). Each target package keeps only the commands
// of its own tool.
package vmtarget

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// Options are what the VM targets' options share: apple.Options and
// microsandbox.Options embed them.
type Options struct {
	Run *runs.Run
	// Image is the Sandbox image (the bundle at manifests.SandboxBundleDir):
	// the VM's root filesystem. InstallImage loads an image into the
	// stand-in inside, as for every target.
	Image engine.Image
	// Tool is the target's tool: a path, or a name on PATH (default: the
	// tool's own name).
	Tool string
	// CPUs and MemoryBytes size the VM (default 4 and 4 GiB; at least 256
	// MiB, rounded down to whole MiB, as the tools take it).
	CPUs        int
	MemoryBytes int64
	// Arch is the VM's architecture, naming the stand-in's directory in
	// the bundle (default this host's: arm64 on Apple silicon).
	Arch string
	// ReadyTimeout bounds the wait for the stand-in to answer (default 2m:
	// a VM boots first), CommandTimeout each command (default
	// toolexec.DefaultTimeout), LoadTimeout the image load (default 10m).
	ReadyTimeout, CommandTimeout, LoadTimeout time.Duration
	// AllowUntestedTool drives a release of the tool newer than the range
	// its package was checked against, with a warning naming the range
	// (otherwise that is refused: toolexec.Spec.CheckVersion).
	AllowUntestedTool bool
	Log               func(format string, args ...any)
}

// Config is a target's Options and what its package says about itself.
type Config struct {
	Target string        // the target's name: the ledger's target, the run's subdirectory
	What   string        // how messages name the VM: "the apple VM"
	Spec   toolexec.Spec // the tool
	// MaxCPUs bounds CPUs where the tool does (0: no bound).
	MaxCPUs int
	Options
}

// GuestStandin is the stand-in's path inside a VM of arch (amd64, arm64)
// booted from the Sandbox image.
func GuestStandin(arch string) string {
	return manifests.SandboxBundleDir + "/bin/linux-" + arch + "/standin"
}

// VM is the shared half of one target: its paths, and the tool once
// ResolveTool found it.
type VM struct {
	C    Config // with the defaults filled in
	Dir  string // <run>/<target>
	Sock string // <run>/<target>/sock/engine.sock: the Engine endpoint
	Logs string // <run>/<target>/logs: each command's output
	Name string // the VM's name: sealbench-<run>-vm
	Tool *toolexec.Tool
}

// New fills c's defaults, checks it, and returns the target's VM. It
// creates nothing and runs nothing.
func New(c Config) (*VM, error) {
	if c.Run == nil {
		return nil, fmt.Errorf("%s target: no run", c.Target)
	}
	if err := c.Image.ID.Validate(); err != nil {
		return nil, fmt.Errorf("%s target: the Sandbox image: %w", c.Target, err)
	}
	if c.Image.Tar == "" || c.Image.Ref == "" {
		return nil, fmt.Errorf("%s target: the Sandbox image needs its tar and its ref", c.Target)
	}
	if c.Tool == "" {
		c.Tool = c.Spec.Default
	}
	if c.CPUs == 0 {
		c.CPUs = 4
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = 4 << 30
	}
	switch {
	case c.CPUs < 1:
		return nil, fmt.Errorf("%s target: %d CPUs", c.Target, c.CPUs)
	case c.MaxCPUs > 0 && c.CPUs > c.MaxCPUs:
		return nil, fmt.Errorf("%s target: %d CPUs (%s takes 1 to %d)", c.Target, c.CPUs, c.Spec.Default, c.MaxCPUs)
	case c.MemoryBytes < 256<<20:
		return nil, fmt.Errorf("%s target: %d bytes of memory is under the 256 MiB a VM needs", c.Target, c.MemoryBytes)
	}
	if c.Arch == "" {
		c.Arch = runtime.GOARCH
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Minute
	}
	if c.LoadTimeout == 0 {
		c.LoadTimeout = 10 * time.Minute
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	dir := filepath.Join(c.Run.Dir, c.Target)
	v := &VM{C: c, Dir: dir, Sock: filepath.Join(dir, "sock", "engine.sock"), Logs: filepath.Join(dir, "logs"),
		Name: engine.SandboxName(c.Run.ID, "vm")}
	if len(v.Sock) > 103 { // macOS's sun_path is 104 bytes
		return nil, fmt.Errorf("the %s target's socket path %s is %d bytes, over the 103 a unix socket allows on macOS: set %s to a shorter directory", c.Target, v.Sock, len(v.Sock), runs.StateDirEnv)
	}
	return v, nil
}

// Endpoint is the Engine API endpoint: the socket in the run directory.
func (v *VM) Endpoint() string { return "unix://" + v.Sock }

// ResolveTool finds the tool (once), its commands logged under Logs.
func (v *VM) ResolveTool() error {
	if v.Tool != nil {
		return nil
	}
	p, err := v.C.Spec.Find(v.C.Tool)
	if err != nil {
		return err
	}
	v.Tool = &toolexec.Tool{Path: p, LogDir: v.Logs, Timeout: v.C.CommandTimeout, Log: v.C.Log}
	return nil
}

// CheckVersion checks the tool's release against the target's range,
// logging the warning for an untested one that AllowUntestedTool lets
// through; it returns the release.
func (v *VM) CheckVersion(ctx context.Context) (toolexec.Version, error) {
	ver, warn, err := v.C.Spec.CheckVersion(ctx, v.Tool, v.C.AllowUntestedTool)
	if warn != "" {
		v.C.Log("warning: %s", warn)
	}
	return ver, err
}

// Record records e, as the target's, in the run's ledger.
func (v *VM) Record(e manifests.LedgerEntry) error {
	e.Target = v.C.Target
	return v.C.Run.Ledger.Record(e)
}

// RecordVM records the VM, held by the tool and labelled with the run.
func (v *VM) RecordVM(detail string) error {
	return v.Record(manifests.LedgerEntry{Kind: manifests.ResourceVM, Key: v.Name, Exe: v.Tool.Path,
		Labels: map[string]string{manifests.RunLabel: v.C.Run.ID}, Detail: detail})
}

// MakeDirs records the target's directory and makes it, and the socket's
// directory, 0700.
func (v *VM) MakeDirs() error {
	if err := v.Record(manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: v.Dir, Detail: "the " + v.C.Target + " target's directory"}); err != nil {
		return err
	}
	for _, d := range []string{v.Dir, filepath.Dir(v.Sock)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("making %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// LoadImage loads the Sandbox image into the tool's own image store,
// unless present says the tool has it under its ref already (then it is
// not this run's to remove). The image is recorded first, by its ref, as
// held by the tool; then prepare gives the tool's arguments (making what
// they name, in the target's directory, when the tool cannot read the
// Sandbox image's tar as it is) and the tool runs with them.
func (v *VM) LoadImage(ctx context.Context, present func(context.Context) (bool, error), prepare func(context.Context) ([]string, error)) error {
	img := v.C.Image
	if have, err := present(ctx); err != nil || have {
		return err
	}
	// Recorded only once it may exist: not for a tar that is not there.
	if _, err := os.Stat(img.Tar); err != nil {
		return fmt.Errorf("the Sandbox image: %w", err)
	}
	entry := manifests.LedgerEntry{Target: v.C.Target, Kind: manifests.ResourceImage, Key: img.Ref, Exe: v.Tool.Path,
		Detail: "the Sandbox image " + img.ID.String() + " in " + v.C.Spec.Default + "'s image store"}
	if err := v.Record(entry); err != nil {
		return err
	}
	// A load that failed with the tool then holding no such image made
	// nothing: its entry is retracted, so that teardown passes it.
	retract := func(err error) error {
		if have, perr := present(ctx); perr == nil && !have {
			if rerr := v.C.Run.Ledger.Retract(entry, "never made: the load failed and "+v.C.Spec.Default+" holds no such image"); rerr != nil {
				return fmt.Errorf("%w (and retracting its ledger entry: %v)", err, rerr)
			}
		}
		return err
	}
	args, err := prepare(ctx)
	if err != nil {
		return retract(fmt.Errorf("preparing the Sandbox image for %s: %w", v.C.Spec.Default, err))
	}
	if _, err := v.Tool.RunTimeout(ctx, v.C.LoadTimeout, args...); err != nil {
		return retract(fmt.Errorf("loading the Sandbox image into %s: %w", v.C.Spec.Default, err))
	}
	if have, err := present(ctx); err != nil {
		return err
	} else if !have {
		return fmt.Errorf("after `%s`, the tool has no image %s: the tar is not the Sandbox image its identity file names",
			toolexec.Quote(append([]string{v.C.Spec.Default}, args...)), img.Ref)
	}
	return nil
}

// WaitReady waits, up to ReadyTimeout, for the stand-in to answer on the
// endpoint, each try waiting at most ping. Between tries alive says
// whether the VM can still answer: its error ends the wait. A stand-in
// that does not answer in time is an error with what logs says.
func (v *VM) WaitReady(ctx context.Context, ping time.Duration, alive func(context.Context) error, logs func(context.Context) string) error {
	deadline := time.Now().Add(v.C.ReadyTimeout)
	for {
		err := engine.Ping(ctx, v.Endpoint(), ping)
		if err == nil {
			return nil
		}
		if err := alive(ctx); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stand-in in %s %s did not answer on %s within %s: %v; %s", v.C.What, v.Name, v.Endpoint(), v.C.ReadyTimeout, err, logs(ctx))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// InstallImage loads img into the stand-in inside the VM.
func (v *VM) InstallImage(ctx context.Context, img engine.Image) error {
	cli, err := engine.NewClient(v.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	return engine.LoadImage(ctx, cli, v.C.Run.Ledger, v.C.Target, v.Endpoint(), img)
}

// Identity asks the stand-in inside the VM: the kernel, CPUs and memory
// are the VM's, as the stand-in sees them.
func (v *VM) Identity(ctx context.Context) (*engine.Identity, error) {
	return engine.Identify(ctx, v.C.Target, v.Endpoint())
}

// created reports whether this run ever recorded anything for the target.
func (v *VM) created() bool {
	for _, e := range v.C.Run.Ledger.Entries() {
		if e.Target == v.C.Target {
			return true
		}
	}
	return false
}

// Destroy tears down every ledger entry of the target, then runs sweep
// (when not nil), which removes whatever the tool still holds with the
// run's label: both steps run, and every failure is returned. A target
// that never recorded anything needs no tool.
func (v *VM) Destroy(ctx context.Context, sweep func(context.Context, *toolexec.Tool) error) error {
	var errs *multierror.Error
	if _, err := runs.Teardown(ctx, v.C.Run.Dir, runs.TeardownOptions{Targets: []string{v.C.Target}, Log: v.C.Log}); err != nil {
		errs = multierror.Append(errs, err)
	}
	if sweep == nil || !v.created() {
		return errs.ErrorOrNil()
	}
	if err := v.ResolveTool(); err != nil {
		return multierror.Append(errs, err).ErrorOrNil()
	}
	if err := sweep(ctx, v.Tool); err != nil {
		errs = multierror.Append(errs, err)
	}
	return errs.ErrorOrNil()
}

// Inventory lists what of the run the target holds: the ledger entries
// whose resource still exists, and what labelled (when not nil: the
// tool's resources carrying the run's label, with their Kind, Key and a
// Detail) adds.
func (v *VM) Inventory(ctx context.Context, labelled func(context.Context, *toolexec.Tool) ([]runs.Resource, error)) ([]runs.Resource, error) {
	out, err := v.C.Run.Held(ctx, v.C.Target)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range out {
		seen[string(r.Kind)+" "+r.Key] = true
	}
	if labelled == nil || !v.created() {
		return out, nil
	}
	if err := v.ResolveTool(); err != nil {
		return nil, err
	}
	rs, err := labelled(ctx, v.Tool)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if !seen[string(r.Kind)+" "+r.Key] {
			r.Target, r.Run, r.Detail = v.C.Target, v.C.Run.ID, r.Detail+", labelled but not in the ledger"
			out = append(out, r)
		}
	}
	return out, nil
}
