package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/machine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/stats"
)

// Paths inside a Sandbox. The bundle is the image's, at BundleDir; the
// Store, workspaces and the native reference live under WorkDir.
const (
	BundleDir = manifests.SandboxBundleDir
	WorkDir   = "/run/sealbench"
	// BodyUser runs cell bodies and verifiers: not root, so no capability
	// the container was granted (CAP_SYS_ADMIN, for layerfsd) reaches them,
	// on dockerd and on the stand-in alike.
	BodyUser = "65534:65534"
)

// DefaultLockPath is the host-wide lock that keeps samples from
// overlapping, whichever run takes them: under /run/lock on Linux, under
// /var/run on macOS, whose root filesystem is read-only.
var DefaultLockPath = func() string {
	if runtime.GOOS == "linux" {
		return "/run/lock/sealbench.lock"
	}
	return "/var/run/sealbench.lock"
}()

// EngineOptions says what RunEngine runs, where, and where results go.
type EngineOptions struct {
	// RunID names the run; Ledger records every Sandbox before it is
	// created, so that `sealbench teardown --run` finds what a crash left.
	RunID  string
	Ledger engine.Recorder
	// Targets are the Engines to run on, each as its target's Identity
	// says (the pins come from it): its name, endpoint and Engine kind.
	Targets []*engine.Identity
	// BundleID is build-linux-<hash>, as verified; Image is the Sandbox
	// image, already on every target's Engine under Image.ID.
	BundleID string
	Image    engine.Image
	// BundleOrigin is the registry reference the bundle was pulled from
	// (nil: a directory), for the pins.
	BundleOrigin *manifests.BundleOrigin
	// RunnerSHA256 is the digest of the runner taking the samples, and
	// RunnerPlatform its os/arch; StandinSHA256 the bundle's stand-in's.
	RunnerSHA256, StandinSHA256 manifests.Digest
	RunnerPlatform              string
	// Suites are the suites the run's cells are of (none: the twelve);
	// Cells the cells of them it runs.
	Suites   []*cells.Suite
	Cells    []string
	Samples  int
	Seed     uint64
	Native   bool
	OutDir   string
	LockPath string            // the host-wide lock; default DefaultLockPath
	Tools    map[string]string // tool versions to pin (go, docker...), beside each Engine's
	Log      func(string, ...any)
	// Status, when set, hears the phase of the sample under way ("local
	// C03 3/24: timed run"), for a terminal's status line.
	Status func(string)
	// Done, when set, hears each finished sample, with a line that says
	// how it went; unset, the line goes to Log.
	Done func(manifests.SampleDone, string)
}

// engineConn is one target's Engine, connected.
type engineConn struct {
	*engine.Identity
	cli *client.Client
	ex  *engine.Execer // the runner's execs: see engine.Execer
	// retired removes, each, a Sandbox whose sample is done, emptied and
	// stopped: called when the run's samples are all taken (protocol 5:
	// removing one frees its inodes).
	retired []func() error
}

// retire ends sb's part in the run without freeing an inode on its
// filesystem: its files under WorkDir are emptied (their blocks freed, so
// that a run's disk use does not grow with its samples) and it is
// stopped; it is removed when the run's samples are all taken
// (removeRetired). A Sandbox whose files could not be emptied (its
// Engine gone, say), or that cannot be stopped (kube-engine's pods are
// removed or running), is removed at once, as before protocol 5: kept
// whole, it would hold all its sample wrote until the run's end.
//
// It returns the Sandbox's exit as the runner timed it: the stop, or
// where the Engine cannot stop a Sandbox (kube-engine), its removal; 0
// when neither was done or timed.
func (c *engineConn) retire(sb *sandbox, remove func() error) (exit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := sb.exec(ctx, true, "/", emptyFiles(WorkDir)+` 2>/dev/null`, nil); err != nil || r.code != 0 {
		remove()
		return 0
	}
	zero := 0
	t0 := time.Now()
	if err := c.cli.ContainerStop(ctx, sb.id, container.StopOptions{Timeout: &zero}); err != nil {
		t1 := time.Now()
		if err := remove(); err != nil {
			return 0
		}
		return time.Since(t1)
	}
	exit = time.Since(t0)
	c.retired = append(c.retired, remove)
	return exit
}

// removeRetired removes every retired Sandbox of conns, saying how many
// through status.
func removeRetired(conns map[string]*engineConn, status func(string)) {
	n := 0
	for _, c := range conns {
		n += len(c.retired)
	}
	if n == 0 {
		return
	}
	status(fmt.Sprintf("removing the %d Sandboxes kept since their samples", n))
	for _, c := range conns {
		for _, remove := range c.retired {
			remove()
		}
		c.retired = nil
	}
}

// RunEngine runs every cell Samples times on every target under the cache
// protocol, targets and cells in a seeded random interleaving, writing each
// sample to OutDir/samples.jsonl as it completes (fsync'd), and
// OutDir/pins.json at the start and again at the end. A cell that fails is
// kept as failed, never retried. It returns the samples; on an error (the
// context ended, say) the samples so far, all of them already on disk.
func RunEngine(ctx context.Context, o EngineOptions) ([]manifests.Sample, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Status == nil {
		o.Status = func(string) {}
	}
	if o.Done == nil {
		o.Done = func(_ manifests.SampleDone, line string) { o.Log("%s", line) }
	}
	if o.Samples <= 0 {
		o.Samples = 1
	}
	if o.LockPath == "" {
		o.LockPath = DefaultLockPath
	}
	if o.RunID == "" || o.Ledger == nil {
		return nil, errors.New("RunEngine: no run to record Sandboxes in")
	}
	if len(o.Targets) == 0 {
		return nil, errors.New("RunEngine: no targets")
	}
	if len(o.Suites) == 0 {
		o.Suites = []*cells.Suite{cells.Default()}
	}
	sel := &cells.Selection{Suites: o.Suites, Cells: o.Cells}
	for _, c := range o.Cells {
		if sel.Cell(c) == nil {
			return nil, fmt.Errorf("cell %s is in none of the run's suites (%s)", c, strings.Join(sel.Names(), ", "))
		}
	}
	if o.Image.Lock != nil {
		if err := sel.CheckTools(o.Image.Lock.PackageNames()); err != nil {
			return nil, err
		}
	}
	pins := &manifests.RunPins{
		FormatVersion: manifests.ResultsFormatVersion, RunID: o.RunID, BundleID: o.BundleID,
		ImageID: o.Image.ID, ImageLock: o.Image.Lock, ImageRelocked: o.Image.Relocked, BundleOrigin: o.BundleOrigin, RunnerSHA256: o.RunnerSHA256, RunnerPlatform: o.RunnerPlatform, StandinSHA256: o.StandinSHA256,
		StoreProfile: manifests.StoreDisposable, ConstructionWorkers: 1,
		Tools: map[string]string{}, Cells: o.Cells, Suites: sel.Names(), SuiteDefs: sel.Defs(), Native: o.Native,
		Seed: o.Seed, Samples: o.Samples, Start: time.Now().UTC(),
		Machines: []manifests.Machine{machine.Probe("/")},
	}
	for k, v := range o.Tools {
		pins.Tools[k] = v
	}
	conns := map[string]*engineConn{}
	var names []string
	for _, id := range o.Targets {
		if _, dup := conns[id.Name]; dup {
			return nil, fmt.Errorf("target %s named twice", id.Name)
		}
		c, err := connectEngine(ctx, id, o.Image)
		if err != nil {
			return nil, err
		}
		defer c.cli.Close()
		defer c.ex.Close()
		conns[id.Name] = c
		names = append(names, id.Name)
		pins.Targets = append(pins.Targets, id.Pins())
		pins.Tools["engine."+id.Name] = id.Engine + " " + id.EngineVersion
	}
	// Before the clients close (deferred above, so run after this).
	defer removeRetired(conns, o.Status)
	pins.FillDefaults()
	if err := pins.Validate(); err != nil {
		return nil, fmt.Errorf("the run's pins are invalid (a bug): %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	if err := writePins(o.OutDir, pins); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(o.OutDir, "samples.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	var out []manifests.Sample
	// take runs one slot's sample, the i-th of total, and writes it out.
	take := func(slot stats.Slot, i int, total string, precision bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := conns[slot.Target]
		where := fmt.Sprintf("%s %s %d/%s", c.Name, slot.Cell, i+1, total)
		o.Status(where + ": waiting for the host lock")
		unlock, wait, err := lockHost(ctx, o.LockPath)
		if err != nil {
			return err
		}
		s := runSample(ctx, c, o, sel.Cell(slot.Cell), slot.Round, i, func(phase string) { o.Status(where + ": " + phase) })
		unlock()
		s.LockWaitNs = wait.Nanoseconds()
		s.Precision = precision
		if err := s.Validate(); err != nil {
			return fmt.Errorf("sample %s round %d is invalid (a bug): %w", s.Cell, s.Round, err)
		}
		line, err := s.MarshalLine()
		if err != nil {
			return err
		}
		if _, err := f.Write(line); err != nil {
			return fmt.Errorf("writing samples.jsonl: %w", err)
		}
		if err := f.Sync(); err != nil {
			return err
		}
		o.Done(manifests.SampleDone{Target: s.Target, Cell: s.Cell, Round: s.Round, Status: s.Status, Precision: s.Precision},
			fmt.Sprintf("%s round %d: %s, command %.1f ms, exec overhead %.2f ms", where, s.Round, sampleSummary(s),
				float64(s.CommandNs)/1e6, float64(s.ExecOverheadNs)/1e6))
		out = append(out, s)
		return nil
	}
	slots := stats.Interleave(names, o.Cells, o.Samples, o.Seed)
	for i, slot := range slots {
		if err := take(slot, i, strconv.Itoa(len(slots)), false); err != nil {
			return out, err
		}
	}
	// The precision rule (protocol 4): a cell whose A/A interval is too
	// wide to tell a stable reference from an unstable one gets another
	// block of rounds on every target, keeping its rounds whole.
	rounds, taken := o.Samples, len(slots)
	for block := 0; o.Native && block < manifests.PrecisionBlocks; block++ {
		wide := ImpreciseCells(out, names, o.Seed)
		if len(wide) == 0 {
			break
		}
		n := len(manifests.BalancedOrders)
		for _, w := range wide {
			o.Log("precision rule: %s", w)
		}
		more := stats.Extend(names, cellsOf(wide), rounds, n, o.Seed)
		for j, slot := range more {
			if err := take(slot, taken+j, fmt.Sprintf("%d (+%d for precision)", taken+len(more), len(more)), true); err != nil {
				return out, err
			}
		}
		rounds += n
		taken += len(more)
	}
	pins.End = time.Now().UTC()
	if kib, ok := machine.ReportedKiB("/"); ok {
		pins.Machines[0].ReportedKiBEnd = &kib
	}
	return out, writePins(o.OutDir, pins)
}

// connectEngine connects to id's Engine and checks that it holds the
// pinned image.
func connectEngine(ctx context.Context, id *engine.Identity, img engine.Image) (*engineConn, error) {
	cli, err := engine.NewClient(id.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("target %s: engine %s: %w", id.Name, id.Endpoint, err)
	}
	have, err := cli.ImageInspect(ctx, img.ID.String())
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("the Sandbox image %s is not on %s: %w", img.ID, id.Name, err)
	}
	if have.ID != img.ID.String() {
		cli.Close()
		return nil, fmt.Errorf("%s reports image id %s for %s, the pinned id is %s: refusing to run on another image", id.Name, have.ID, img.ID, img.ID)
	}
	return &engineConn{Identity: id, cli: cli, ex: engine.NewExecer(ctx, cli)}, nil
}

func sampleSummary(s manifests.Sample) string {
	if s.Status == manifests.StatusOK {
		return "ok"
	}
	return string(s.Status) + " (" + s.Reason + ")"
}

func writePins(dir string, p *manifests.RunPins) error {
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "pins.json"), b, 0o644)
}

// lockHost takes the host-wide lock (flock) so that no two samples run at
// once on this host, and says how long it waited.
func lockHost(ctx context.Context, path string) (func(), time.Duration, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("opening the host-wide lock %s: %w", path, err)
	}
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, 0, fmt.Errorf("taking the host-wide lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return func() { f.Close() }, time.Since(start), nil
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
