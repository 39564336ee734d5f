// Package apple provisions the apple target: one lightweight Linux VM made
// by Apple's `container` tool (github.com/apple/container, macOS on Apple
// silicon), running the Engine API stand-in from the Sandbox image, its
// socket published to the host. The runner then drives it exactly like the
// local target: through the Engine API, with the Sandbox image loaded into
// the stand-in.
//
// What it runs, in order (every command with a deadline, its output kept in
// <run>/apple/logs/):
//
//	container --version                          # MinVersion to MaxVersion
//	container system status                      # (container system start --enable-kernel-install, with Options.StartSystem)
//	container image load --input <run>/apple/sandbox-image-oci.tar   # the Sandbox image as an OCI layout (ocitar.go)
//	container run --detach --name sealbench-<run>-vm --label sealbench.run=<run> \
//	    --cpus N --memory MM --network none --cap-add ALL \
//	    --publish-socket <run>/apple/sock/engine.sock:/tmp/sealbench-sock/standin.sock \
//	    <image ref> /opt/sealbench/bin/linux-<arch>/standin serve \
//	    --socket /tmp/sealbench-sock/standin.sock --state /var/lib/sealbench/standin
//
// and to take it down: `container delete --force`, then the anonymous
// volumes its mounts named (they outlive their container), then
// `container image delete`. Inventory and the audit read `container list
// --all --format json` and keep what carries sealbench.run (the tool has no
// label filter).
//
// Every command line and JSON shape was checked against apple/container's
// sources at the tags 1.0.0 and 1.2.2 (the newest release when this was
// written, 2026-08-07): the flags of run in
// Sources/Services/ContainerAPIService/Client/Flags.swift (Flags.Resource
// --cpus and --memory, Flags.Management --detach, --name, --label,
// --network, --cap-add, --publish-socket), `--network none` in
// Utility.swift (NetworkClient.noNetworkName: no interface at all),
// --cap-add ALL in Sources/Services/RuntimeLinux/Server/RuntimeService.swift
// (effectiveCapabilities: since 0.12.0 a container's process gets only the
// OCI default capabilities, containerization's defaultOCICapabilities,
// without CAP_SYS_ADMIN, which the stand-in needs for its Sandboxes'
// namespaces and mounts and layerfsd for FUSE; the VM is the boundary,
// one per target, and it has /dev/fuse: containerization's
// LinuxContainer.defaultMounts put a devtmpfs on /dev, and its kernel
// config has CONFIG_FUSE_FS=y), --publish-socket's
// host_path:container_path in Parser.swift (publishSocket: it refuses a
// host socket that exists, so Create removes a stale one first), the
// name's rule in Sources/ContainerResource/Container/ManagedContainer.swift
// (nameValid: at most 63 characters in 1.2.2; 1.0.0 had no bound), image
// load in Sources/ContainerCommands/Image/ImageLoad.swift, list, delete,
// logs, image list/delete, volume list/delete and system status/start in
// Sources/ContainerCommands; the JSON in json.go. Options.AllowUntestedTool
// lets a newer release run, with a warning.
//
// The ledger names the VM as a vm and the Sandbox image in the tool's
// store as an image keyed by its reference, both with the tool's path as
// their exe; the audit reports labelled volumes as volumes. The package's
// runs.Backend removes them wherever it is linked in.
//
// A run's apple target lives in <run>/apple: sock/engine.sock (the Engine
// endpoint, in a 0700 directory) and logs/ (each command's stdout and
// stderr).
package apple

import (
	"context"
	"errors"
	"fmt"
	"os"
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
const Name = "apple"

// DefaultTool is the tool's name on PATH.
const DefaultTool = "container"

// MinVersion is the oldest `container` this package drives: 1.0.0 gave
// `list --format json` and `image list --format json` the shapes json.go
// reads (ManagedContainer, ImageResource; apple/container#1652, #1656).
// `--network none` is older (0.6.0, apple/container#739).
var MinVersion = toolexec.MustVersion("1.0.0")

// MaxVersion is the newest `container` whose sources this package was
// checked against: 1.2.2. A newer one is refused unless
// Options.AllowUntestedTool.
var MaxVersion = toolexec.MustVersion("1.2.2")

// maxName is the longest container name the tool takes (ManagedContainer.
// nameValid in 1.2.2: a DNS label).
const maxName = 63

// Paths inside the VM. The Sandbox image holds the bundle at
// /opt/sealbench; the socket and state live on the container's own
// writable root. The stand-in makes only the socket's own directory, so
// that lies in /tmp, which every root filesystem has.
const (
	GuestSocket = "/tmp/sealbench-sock/standin.sock"
	GuestState  = "/var/lib/sealbench/standin"
)

// OCIArchive is the Sandbox image as an OCI layout archive, made in the
// target's directory for `container image load` and removed once loaded.
const OCIArchive = "sandbox-image-oci.tar"

// Errors Check answers, wrapped with the details; the CLI tells them apart
// with errors.Is.
var (
	ErrToolMissing  = errors.New("Apple's container tool is not installed")
	ErrToolTooOld   = errors.New("Apple's container tool is too old")
	ErrToolUntested = errors.New("Apple's container tool is newer than the releases sealbench was checked against")
	ErrNotRunning   = errors.New("the container system service is not running")
)

const releases = "https://github.com/apple/container/releases"

// spec is the tool this package drives.
var spec = toolexec.Spec{Default: DefaultTool, Min: MinVersion, MinWhy: "for the JSON of list and image list",
	Max: MaxVersion, Checked: "apple/container's sources at 1.0.0 and 1.2.2",
	Install: "install it from " + releases + " (macOS 26 on Apple silicon)", Upgrade: "upgrade from " + releases,
	ErrMissing: ErrToolMissing, ErrTooOld: ErrToolTooOld, ErrUntested: ErrToolUntested}

var _ provision.Target = (*Apple)(nil)

// Options configures the apple target: what every VM target takes, and
// whether to start the container system service.
type Options struct {
	vmtarget.Options
	// StartSystem runs `container system start` when the service is not
	// running, instead of failing.
	StartSystem bool
}

// Apple is one `container` VM running the stand-in.
type Apple struct {
	vm          *vmtarget.VM
	startSystem bool
}

// New returns the apple target of o.Run. It creates nothing and runs
// nothing; a missing tool is found by Create (and Check).
func New(o Options) (*Apple, error) {
	vm, err := vmtarget.New(vmtarget.Config{Target: Name, What: "the apple VM", Spec: spec,
		Options: o.Options})
	if err != nil {
		return nil, err
	}
	if len(vm.Name) > maxName {
		return nil, fmt.Errorf("apple target: the VM's name %s is %d characters; `container` takes at most %d: use a run id of at most %d", vm.Name, len(vm.Name), maxName, maxName-len(vm.Name)+len(o.Run.ID))
	}
	return &Apple{vm: vm, startSystem: o.StartSystem}, nil
}

func (a *Apple) Name() string     { return Name }
func (a *Apple) Endpoint() string { return a.vm.Endpoint() }

// VMName is the container's name: sealbench-<run>-vm.
func (a *Apple) VMName() string { return a.vm.Name }

// up reports whether our VM runs and its stand-in answers.
func (a *Apple) up(ctx context.Context) bool {
	if a.vm.Tool == nil {
		return false
	}
	c, err := findContainer(ctx, a.vm.Tool, a.vm.Name)
	if err != nil || c == nil || c.state() != "running" {
		return false
	}
	return engine.Ping(ctx, a.Endpoint(), 5*time.Second) == nil
}

// Create checks the tool, loads the Sandbox image into it, and starts the
// VM with the stand-in; when the VM runs and answers already, it does
// nothing. A VM of ours that is there but does not answer is deleted and
// started again.
func (a *Apple) Create(ctx context.Context) error {
	vm := a.vm
	if err := vm.ResolveTool(); err != nil {
		return err
	}
	if a.up(ctx) {
		return nil
	}
	t := vm.Tool
	if _, err := vm.CheckVersion(ctx); err != nil {
		return err
	}
	if err := systemRuns(ctx, t, a.startSystem); err != nil {
		return err
	}
	if err := vm.MakeDirs(); err != nil {
		return err
	}
	img := vm.C.Image
	present := func(ctx context.Context) (bool, error) { return hasImage(ctx, t, img.Ref) }
	oci := filepath.Join(vm.Dir, OCIArchive)
	defer os.Remove(oci) // loaded, the tool has its own copy
	prepare := func(context.Context) ([]string, error) {
		if err := ociArchive(img.Tar, oci, img.Ref, img.ID); err != nil {
			return nil, err
		}
		return []string{"image", "load", "--input", oci}, nil
	}
	if err := vm.LoadImage(ctx, present, prepare); err != nil {
		return err
	}
	if err := vm.RecordVM("the VM running the stand-in"); err != nil {
		return err
	}
	if err := vm.Record(manifests.LedgerEntry{Kind: manifests.ResourceSocket, Key: vm.Sock, Detail: "the stand-in's Engine API socket, published from the VM"}); err != nil {
		return err
	}
	// A VM of ours left from an earlier Create that no longer answers.
	if c, err := findContainer(ctx, t, vm.Name); err != nil {
		return err
	} else if c != nil {
		vm.C.Log("%s is %s and does not answer: deleting it to start again", vm.Name, c.state())
		if err := removeContainer(ctx, t, vm.Name); err != nil {
			return err
		}
	}
	if err := os.Remove(vm.Sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %w", vm.Sock, err)
	}
	args := []string{"run", "--detach", "--name", vm.Name,
		"--label", manifests.RunLabel + "=" + vm.C.Run.ID,
		"--cpus", strconv.Itoa(vm.C.CPUs), "--memory", strconv.FormatInt(vm.C.MemoryBytes>>20, 10) + "M",
		"--network", "none", "--cap-add", "ALL",
		"--publish-socket", vm.Sock + ":" + GuestSocket,
		img.Ref,
		vmtarget.GuestStandin(vm.C.Arch), "serve", "--socket", GuestSocket, "--state", GuestState}
	if _, err := t.Run(ctx, args...); err != nil {
		return fmt.Errorf("starting the apple VM: %w", err)
	}
	vm.C.Log("started VM %s, waiting for %s", vm.Name, a.Endpoint())
	return vm.WaitReady(ctx, 2*time.Second, a.running, func(ctx context.Context) string { return "its log:\n" + a.vmLog(ctx) })
}

// running is nil while the VM runs.
func (a *Apple) running(ctx context.Context) error {
	c, err := findContainer(ctx, a.vm.Tool, a.vm.Name)
	switch {
	case err != nil:
		return err
	case c == nil:
		return fmt.Errorf("the apple VM %s is gone before its stand-in answered; its log:\n%s", a.vm.Name, a.vmLog(ctx))
	case c.state() != "running":
		return fmt.Errorf("the apple VM %s is %s before its stand-in answered; its log:\n%s", a.vm.Name, c.state(), a.vmLog(ctx))
	}
	return nil
}

// vmLog is the tail of the VM's init output (the stand-in's log).
func (a *Apple) vmLog(ctx context.Context) string {
	out, err := a.vm.Tool.Run(ctx, "logs", a.vm.Name)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(out))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// InstallImage loads img into the stand-in inside the VM.
func (a *Apple) InstallImage(ctx context.Context, img engine.Image) error {
	return a.vm.InstallImage(ctx, img)
}

// Identity asks the stand-in inside the VM: the kernel, CPUs and memory
// are the VM's, as the container sees them.
func (a *Apple) Identity(ctx context.Context) (*engine.Identity, error) { return a.vm.Identity(ctx) }

// Destroy tears down every ledger entry of the apple target, then any
// container still labelled with the run: both steps run, and every
// failure is returned.
func (a *Apple) Destroy(ctx context.Context) error {
	return a.vm.Destroy(ctx, func(ctx context.Context, t *toolexec.Tool) error {
		cs, err := labelled(ctx, t, a.vm.C.Run.ID)
		if err != nil {
			return err
		}
		var errs []error
		for _, c := range cs {
			errs = append(errs, removeContainer(ctx, t, c.Configuration.ID))
		}
		return errors.Join(errs...)
	})
}

// Inventory lists what of the run the apple target holds: ledger entries
// whose resource still exists, and containers labelled with the run.
func (a *Apple) Inventory(ctx context.Context) ([]runs.Resource, error) {
	return a.vm.Inventory(ctx, func(ctx context.Context, t *toolexec.Tool) ([]runs.Resource, error) {
		cs, err := labelled(ctx, t, a.vm.C.Run.ID)
		var out []runs.Resource
		for _, c := range cs {
			out = append(out, runs.Resource{Kind: manifests.ResourceVM, Key: c.Configuration.ID, Detail: c.state()})
		}
		return out, err
	})
}
