package orchestrate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runner"
	"github.com/sealbench/sealbench/runner/stats"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
)

// A runner per host (docs/design/remote-hosts.md): this machine's
// targets are sampled by the bundle's runner here, as they always were;
// each remote host's by the bundle's runner for its platform, installed
// in the run's directory there, next to its Engine, with a plan of that
// host's targets. The groups run in parallel, each its own seeded
// interleaving and its own host-wide lock; their samples and pins are
// merged into the run's results, this machine's first, then each host's
// by its name.

// group is the targets one runner samples: this machine's (host "" and
// node ""), one remote host's, or one Kubernetes node's that is not this
// machine (its runner runs here, beside this machine's).
type group struct {
	host string // ssh://user@host:port, or ""
	spec *remote.Host
	// node and nodeBoot are the node's name and boot id, for a node's
	// group.
	node, nodeBoot string
	ids            []*engine.Identity
	// pins are the targets as the group's plan has them (where its
	// runner runs included); nil before the plan is made.
	pins []manifests.TargetPins
}

// groupTargets splits ids by the machine each samples on: this
// machine's group first, then each remote host's and each other
// Kubernetes node's, by key. here is this machine's boot id.
func groupTargets(ids []*engine.Identity, specs map[string]remote.Spec, here string) []*group {
	byKey := map[string]*group{}
	for _, id := range ids {
		g := &group{}
		if s, ok := specs[id.Name]; ok && s.Host != nil {
			g = &group{host: s.Host.String(), spec: s.Host}
		} else if id.NodeBootID != "" && id.NodeBootID != here {
			g = &group{node: id.Node, nodeBoot: id.NodeBootID}
		}
		if have := byKey[g.key()]; have != nil {
			g = have
		} else {
			byKey[g.key()] = g
		}
		g.ids = append(g.ids, id)
	}
	var out []*group
	for _, g := range byKey {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// key tells groups apart: "" for this machine's, the host, or the node's
// boot id (two names of one node are one machine).
func (g *group) key() string {
	switch {
	case g.host != "":
		return g.host
	case g.nodeBoot != "":
		return "node " + g.nodeBoot
	}
	return ""
}

// here says the group's runner runs on this machine: this machine's
// group, or a node's.
func (g *group) here() bool { return g.host == "" }

// label is how progress lines name a group other than this machine's.
func (g *group) label() string {
	if g.node != "" {
		return "node " + g.node
	}
	return g.host
}

// name is the group's results directory under the run's results/ (and,
// for a node's, what its runner's copy and plan are named by): "local"
// for this machine's, node-NODE for a node's.
func (g *group) name() string {
	if g.node != "" {
		return "node-" + g.node
	}
	return "local"
}

// placeHere makes plan, of a group whose runner runs here, the group's:
// a node's samples are taken one at a time under a lock of the node's
// (as its Lease keeps them across runs), beside this machine's, in an
// order of their own.
func (g *group) placeHere(plan *manifests.RunPlan, o RunOptions) {
	if g.nodeBoot == "" {
		return
	}
	plan.Lock = filepath.Join(filepath.Dir(runner.DefaultLockPath), "sealbench-node-"+g.nodeBoot+".lock")
	plan.Seed = groupSeed(o.Seed, g.key())
}

// thisBootID is this machine's boot id, which a Kubernetes node that is
// this machine reports too.
var thisBootID = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
})

// groupSeed is the seed of a group's interleaving: the run's for this
// machine's, the run's and the group's key hashed for another's.
func groupSeed(seed uint64, key string) uint64 {
	if key == "" {
		return seed
	}
	h := sha256.New()
	binary.Write(h, binary.BigEndian, seed)
	h.Write([]byte(key))
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// order is the slots the group's runner takes, in its order.
func (g *group) order(o RunOptions) []stats.Slot {
	var names []string
	for _, id := range g.ids {
		names = append(names, id.Name)
	}
	return stats.Interleave(names, o.Cells, o.Samples, groupSeed(o.Seed, g.key()))
}

// groupResult is what one group's runner left: its samples and pins (as
// copied back, for a remote host), and why it could not take them all.
type groupResult struct {
	samples []manifests.Sample
	pins    *manifests.RunPins
	err     error
	// lost says the host's connection was lost: the samples not taken are
	// recorded as failed with it.
	lost error
}

// runGroups runs every group's runner at once and merges what they took
// into out's samples.jsonl and pins.json. It returns the merged samples,
// the slots none took, and the first error of a group that is not a lost
// host (whose samples are failed instead).
func runGroups(ctx context.Context, run *runs.Run, b *Bundle, o RunOptions, groups []*group, targets map[string]provision.Target,
	conns *hostConns, out string, logf func(string, ...any), status func(string)) ([]manifests.Sample, []stats.Slot, error) {
	results := make([]groupResult, len(groups))
	// Every host is made ready first, one after another: what that
	// records goes into the run's ledger here, which the runner here
	// appends to once it starts.
	ready := make([]*hostRunner, len(groups))
	for i, g := range groups {
		if !g.here() {
			ready[i], results[i] = prepareHost(ctx, run, b, o, g, targets, conns)
		}
	}
	var wg sync.WaitGroup
	var statusMu sync.Mutex
	for i, g := range groups {
		if !g.here() && ready[i] == nil {
			continue // results[i] says why
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The groups share the terminal: one line at a time.
			prefix := ""
			if l := g.label(); l != "" {
				prefix = l + ": "
			}
			glog := func(f string, a ...any) {
				statusMu.Lock()
				defer statusMu.Unlock()
				logf("%s%s", prefix, fmt.Sprintf(f, a...))
			}
			gstatus := func(s string) { statusMu.Lock(); status(s); statusMu.Unlock() }
			if g.here() {
				results[i] = runHere(ctx, run, b, o, g, glog, gstatus)
			} else {
				results[i] = ready[i].run(ctx, o, g, glog, gstatus)
			}
		}()
	}
	wg.Wait()

	var all []manifests.Sample
	var missing []stats.Slot
	var firstErr error
	var parts []*manifests.RunPins
	for i, g := range groups {
		r := results[i]
		have := map[stats.Slot]bool{}
		for _, s := range r.samples {
			have[stats.Slot{Round: s.Round, Target: s.Target, Cell: s.Cell}] = true
		}
		samples := r.samples
		for _, sl := range g.order(o) {
			switch {
			case have[sl]:
			case r.lost != nil:
				samples = append(samples, lostSample(run.ID, b.Verified.Name, sl, fmt.Sprintf("host %s lost: %v", g.host, r.lost)))
			default:
				missing = append(missing, sl)
			}
		}
		for j := range samples {
			samples[j].Order = len(all) + j
		}
		all = append(all, samples...)
		if r.pins != nil {
			for k := range r.pins.Machines {
				r.pins.Machines[k].Host = g.host // the machine its runner ran on
			}
			parts = append(parts, r.pins)
		}
		if r.lost != nil {
			logf("%s was lost: %d samples it had not sent back are recorded as failed", g.host, len(samples)-len(r.samples))
		}
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
	}
	if len(parts) == 0 {
		// No runner's pins came back (every host lost): the run's pins
		// are what the first host's plan said.
		for _, h := range ready {
			if h != nil {
				parts = append(parts, h.plannedPins())
				break
			}
		}
	}
	if err := writeMerged(out, all, mergePins(parts, groups, o)); err != nil && firstErr == nil {
		firstErr = err
	}
	return all, missing, firstErr
}

// lostSample is the failed sample of a slot that a lost host's runner did
// not send back.
func lostSample(runID, bundleID string, sl stats.Slot, reason string) manifests.Sample {
	now := time.Now().UTC()
	return manifests.Sample{FormatVersion: manifests.ResultsFormatVersion, RunID: runID, BundleID: bundleID, Target: sl.Target, Cell: sl.Cell, Round: sl.Round,
		Status: manifests.StatusFailed, Reason: reason, Verifier: manifests.VerifierNotRun, FUSERequests: map[string]int64{}, Start: now, End: now}
}

// mergePins is the run's pins: the first group's as they came back, with
// every group's targets (as its plan had them, where the runner ran
// included), every runner's tools, each machine a runner ran on once (a
// node's runner runs on this machine too), the run's seed, and the span
// of all.
func mergePins(parts []*manifests.RunPins, groups []*group, o RunOptions) *manifests.RunPins {
	if len(parts) == 0 {
		return nil
	}
	m := *parts[0]
	m.Targets, m.Tools, m.Machines, m.Seed = nil, map[string]string{}, nil, o.Seed
	for _, p := range parts {
		for _, mc := range p.Machines {
			if !slices.ContainsFunc(m.Machines, func(have manifests.Machine) bool { return have.Host == mc.Host }) {
				m.Machines = append(m.Machines, mc)
			}
		}
	}
	for _, g := range groups {
		if g.pins != nil {
			m.Targets = append(m.Targets, g.pins...)
			continue
		}
		for _, id := range g.ids {
			m.Targets = append(m.Targets, id.Pins())
		}
	}
	for _, p := range parts {
		for k, v := range p.Tools {
			m.Tools[k] = v
		}
		if p.Start.Before(m.Start) {
			m.Start = p.Start
		}
		if p.End.IsZero() || m.End.IsZero() {
			m.End = time.Time{} // one runner did not finish: neither did the run
		} else if p.End.After(m.End) {
			m.End = p.End
		}
	}
	return &m
}

// writeMerged writes the merged samples and pins into out.
func writeMerged(out string, samples []manifests.Sample, pins *manifests.RunPins) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, s := range samples {
		line, err := s.MarshalLine()
		if err != nil {
			return err
		}
		buf.Write(line)
	}
	if err := atomicfile.WriteFile(filepath.Join(out, manifests.SamplesFile), buf.Bytes(), 0o644); err != nil {
		return err
	}
	if pins == nil {
		return nil
	}
	if err := pins.Validate(); err != nil {
		return fmt.Errorf("the run's merged pins are invalid (a bug): %w", err)
	}
	pb, err := pins.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(out, manifests.PinsFile), pb, 0o644)
}

// runHere runs this machine's group with the runner here, as a run of
// this machine's targets alone does, into the run's directory.
func runHere(ctx context.Context, run *runs.Run, b *Bundle, o RunOptions, g *group, logf func(string, ...any), status func(string)) groupResult {
	plan, err := newPlan(run, b, o, g.ids, filepath.Join(run.Dir, "results", g.name()))
	if err != nil {
		return groupResult{err: err}
	}
	g.placeHere(plan, o)
	samples, err := runSealed(ctx, run, b, plan, g.name(), logf, status, o.doneOr(logf))
	r := groupResult{samples: samples, err: err}
	if p, perr := readPins(filepath.Join(plan.OutDir, manifests.PinsFile)); perr == nil {
		r.pins = p
	} else if r.err == nil {
		r.err = perr
	}
	return r
}

func readPins(p string) (*manifests.RunPins, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return manifests.ReadRunPins(bytes.NewReader(b))
}

// hostEndpoint is what a remote target's Engine is, as its host sees it.
type hostEndpoint interface{ HostEndpoint() string }

// hostRunner is a remote host's runner, installed, with its plan.
type hostRunner struct {
	c                  *sshx.Client
	dir, exe, planPath string
	plan               *manifests.RunPlan
	platform           string
	start              time.Time
}

// run runs a remote host's runner: its stdin stays open for the run
// (stopOnStdinEOF), so that Ctrl-C here, which closes it, and a lost
// connection stop it at the sample under way. When it exits, its
// samples.jsonl and pins.json come back, hashed on both sides.
func (h *hostRunner) run(ctx context.Context, o RunOptions, g *group, logf func(string, ...any), status func(string)) groupResult {
	h.start = time.Now().UTC()
	logf("sampling with the bundle's runner %s there (%s), plan %s", h.exe, h.plan.RunnerSHA256.Short(16), h.planPath)
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	execCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			// Ctrl-C: the runner stops at the sample under way when its
			// stdin ends; past the grace, its process group is killed.
			release()
			select {
			case <-time.After(runnerGrace):
				cancel()
			case <-execCtx.Done():
			}
		case <-execCtx.Done():
		}
	}()
	pr, pw := io.Pipe()
	relayed := make(chan string, 1)
	go func() { relayed <- relayProgress(pr, logf, status, o.doneOr(logf)) }()
	slots := len(g.order(o))
	_, runErr := h.c.Exec(execCtx, sshx.Command{Name: "runner", Argv: []string{h.exe, "sample", "--plan", h.planPath},
		Hold: hold, Stderr: pw, Timeout: time.Duration(slots)*runnerSampleDeadline + 10*time.Minute})
	release()
	pw.Close()
	last := <-relayed
	cancel()

	r := groupResult{}
	if lost := h.c.Err(); lost != nil {
		// What the runner wrote up to then stays on the host until a
		// teardown there removes the run's directory.
		r.lost = lost
		return r
	}
	r.err = runnerExit(ctx, runErr, last)
	var err error
	if r.samples, r.pins, err = fetchResults(context.WithoutCancel(ctx), h.c, path.Join(h.dir, "results")); err != nil {
		if h.c.Err() != nil {
			r.lost = h.c.Err()
		} else if r.err == nil {
			r.err = fmt.Errorf("%s: %w", g.host, err)
		}
	}
	return r
}

// plannedPins are the pins the host's runner would have written at its
// start, from its plan: for a host lost before they came back.
func (h *hostRunner) plannedPins() *manifests.RunPins {
	p := h.plan
	pins := &manifests.RunPins{FormatVersion: p.FormatVersion, RunID: p.RunID, BundleID: p.BundleID,
		ImageID: p.Image.ID, ImageLock: p.Image.Lock, ImageRelocked: p.Image.Relocked, BundleOrigin: p.BundleOrigin,
		RunnerSHA256: p.RunnerSHA256, RunnerPlatform: h.platform, StandinSHA256: p.StandinSHA256,
		StoreProfile: manifests.StoreDisposable, ConstructionWorkers: 1, Tools: map[string]string{},
		Cells: p.Cells, Suites: p.Suites, SuiteDefs: p.SuiteDefs, Native: p.Native, Seed: p.Seed, Samples: p.Samples, Start: h.start}
	pins.FillDefaults()
	return pins
}

// runnerSampleDeadline bounds one sample of a remote runner, for the
// deadline of the whole run there: generous, as a sample is minutes at
// most; a lost host is found by keep-alives long before.
const runnerSampleDeadline = 30 * time.Minute

// prepareHost connects to g's host, makes the run's directory there
// (recorded first, with no target: the run's), installs the bundle's
// runner for the host's platform there and checks it
// (remote.HostBundle), and writes its plan: the targets' Engines as the
// host sees them, the host's lock, the runner's ledger and results in the
// run's directory there. A host that cannot be made ready is the
// result's error, or, lost, its samples' reason.
func prepareHost(ctx context.Context, run *runs.Run, b *Bundle, o RunOptions, g *group, targets map[string]provision.Target, conns *hostConns) (*hostRunner, groupResult) {
	c, err := conns.get(ctx, g.spec)
	if err != nil {
		return nil, groupResult{err: err}
	}
	h, err := writeHostPlan(ctx, run, b, o, g, targets, c)
	switch {
	case err == nil:
		return h, groupResult{}
	case c.Err() != nil:
		return nil, groupResult{lost: c.Err()}
	default:
		return nil, groupResult{err: fmt.Errorf("%s: %w", g.host, err)}
	}
}

func writeHostPlan(ctx context.Context, run *runs.Run, b *Bundle, o RunOptions, g *group, targets map[string]provision.Target, c *sshx.Client) (*hostRunner, error) {
	p, err := remote.Platform(ctx, c)
	if err != nil {
		return nil, err
	}
	state, err := remote.HostStateDir(ctx, c)
	if err != nil {
		return nil, err
	}
	defLock := "/var/run/sealbench.lock"
	if p.OS == "linux" {
		defLock = "/run/lock/sealbench.lock"
	}
	lock, err := remote.HostLock(ctx, c, defLock)
	if err != nil {
		return nil, err
	}
	// Apart from the run's directory here and on its other hosts, even
	// when they are one machine.
	hostRun := runs.HostRunDir(state, run.ID, g.host)
	if err := run.Ledger.Record(manifests.LedgerEntry{Host: g.host, Kind: manifests.ResourceDir, Key: hostRun, Detail: "the run's directory on the host"}); err != nil {
		return nil, err
	}
	// The runner's ledger (which teardown reads there) and its results.
	if _, err := c.Exec(ctx, sshx.Command{Name: "mkdir-run", Argv: []string{"sh", "-c", `umask 077 && mkdir -p -- "$1/results" && : >> "$1/` + manifests.LedgerFile + `"`, "sh", hostRun}}); err != nil {
		return nil, err
	}
	rel := bundle.RunnerPath(p.OS, p.Arch)
	hb := remote.HostBundle{SSH: c, Host: g.host, Bundle: b.Dir, Manifest: b.Verified.Manifest, Files: []string{rel}, Dir: path.Join(hostRun, runnerDir)}
	if err := hb.Install(ctx, run.Ledger); err != nil {
		return nil, err
	}
	want, _ := b.Verified.Manifest.File(rel)
	standin, _ := b.Verified.Manifest.File("bin/" + p.Dir() + "/standin")
	plan := basePlan(run, b, o)
	plan.Ledger, plan.Lock, plan.OutDir = path.Join(hostRun, manifests.LedgerFile), lock, path.Join(hostRun, "results")
	plan.Seed, plan.StandinSHA256, plan.RunnerSHA256, plan.StopOnStdinEOF = groupSeed(o.Seed, g.key()), standin.Digest, want.Digest, true
	for _, id := range g.ids {
		he, ok := targets[id.Name].(hostEndpoint)
		if !ok || he.HostEndpoint() == "" {
			return nil, fmt.Errorf("target %s has no Engine a runner on its host can reach", id.Name)
		}
		// The runner reaches the Engine through its socket there.
		there := *id
		there.Endpoint, there.Transport, there.RunnerHost = he.HostEndpoint(), "", g.host
		plan.Targets = append(plan.Targets, there.Plan())
		g.pins = append(g.pins, there.Pins())
	}
	if err := plan.Validate(); err != nil {
		return nil, fmt.Errorf("the run plan is invalid (a bug): %w", err)
	}
	pb, err := plan.Marshal()
	if err != nil {
		return nil, err
	}
	if err := c.CopyFile(ctx, path.Join(hostRun, planFile), 0o600, bytes.NewReader(pb), int64(len(pb)), manifests.DigestOf(pb)); err != nil {
		return nil, err
	}
	return &hostRunner{c: c, dir: hostRun, exe: path.Join(hb.Dir, rel), planPath: path.Join(hostRun, planFile), plan: plan, platform: p.OS + "/" + p.Arch}, nil
}

// fetchResults copies a remote runner's samples and pins back.
func fetchResults(ctx context.Context, c *sshx.Client, dir string) ([]manifests.Sample, *manifests.RunPins, error) {
	sb, ok, err := c.FetchFile(ctx, path.Join(dir, manifests.SamplesFile))
	if err != nil || !ok {
		return nil, nil, err
	}
	samples, err := manifests.ReadSamples(bytes.NewReader(sb))
	if err != nil {
		return nil, nil, fmt.Errorf("the runner's samples on %s: %w", c, err)
	}
	pb, ok, err := c.FetchFile(ctx, path.Join(dir, manifests.PinsFile))
	if err != nil || !ok {
		return samples, nil, err
	}
	pins, err := manifests.ReadRunPins(bytes.NewReader(pb))
	if err != nil {
		return samples, nil, fmt.Errorf("the runner's pins on %s: %w", c, err)
	}
	return samples, pins, nil
}

// runnerExit says how a remote runner ended, as startRunner does for one
// here.
func runnerExit(ctx context.Context, err error, last string) error {
	var ce *sshx.CommandError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &ce) && ce.ExitCode >= 0:
		return exitError(ce.ExitCode, last)
	default:
		return fmt.Errorf("the bundle's runner: %w (%s)", err, strings.TrimSpace(last))
	}
}
