package runs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/kparam"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/standin/inventory"
)

// TargetLocal is the target what the audit finds under runs/ on this host
// outside any ledger is listed under: directories that are not runs,
// mounts, processes. Every other target's leftovers come from the runs'
// ledgers and the targets' registered Backends.
const TargetLocal = "local"

// AuditOptions says where to look.
type AuditOptions struct {
	StateDir string
	// Targets limits the audit to these targets; empty means all. Host
	// leftovers without a ledger count as local.
	Targets []string
	// Run limits the audit (and Fix) to one run; empty means every run,
	// and what belongs to no run.
	Run string
	// SSH overrides how each run's hosts.json (or the hosts history)
	// says its remote hosts are reached.
	SSH SSHOptions
	// Hosts are remote hosts (ssh://user@host:port) to ask for what
	// carries the sealbench.run label, as --target KIND@ssh://... names
	// them, whether or not a run here used them. With Targets and no
	// Hosts, no remote host is asked but through the runs' ledgers;
	// without Targets, every host of the hosts history is.
	Hosts []string
	// Force makes Fix tear down runs in progress too (another process
	// holds their lock, LockFile); without it Fix leaves them, and
	// everything found of them, as it is.
	Force bool
}

func (o AuditOptions) wants(target string) bool {
	if len(o.Targets) == 0 || target == "" {
		return true
	}
	for _, t := range o.Targets {
		if t == target {
			return true
		}
	}
	return false
}

// named reports whether target was asked for by name.
func (o AuditOptions) named(target string) bool {
	return len(o.Targets) > 0 && o.wants(target)
}

// AuditResult is what the audit found.
type AuditResult struct {
	Leftovers []Resource `json:"leftovers"`
	// Notes say what could not be checked, and why.
	Notes []string `json:"notes"`
}

type auditor struct {
	opts    AuditOptions
	runs    string
	res     *AuditResult
	seen    map[string]bool
	seenPid map[int]bool
	// ledgerHosts are "run host" pairs the runs' ledgers here covered:
	// the hosts history need not ask for them again.
	ledgerHosts map[string]bool
}

func (a *auditor) add(r Resource) {
	if a.opts.Run != "" && r.Run != a.opts.Run {
		return
	}
	k := r.Target + "\x00" + r.Host + "\x00" + string(r.Kind) + "\x00" + r.Key
	if a.seen[k] {
		return
	}
	a.seen[k] = true
	a.res.Leftovers = append(a.res.Leftovers, r)
}

// Audit asks every source it knows for what sealbench left: each run's
// ledger (every entry whose resource still exists, and every kernel
// parameter whose change is still in effect), directories under runs/
// that are not runs with a ledger, stand-in state directories
// (inventory.Read), mounts under runs/ (/proc/self/mountinfo),
// processes whose argv names a path under runs/, and every registered
// target's Backend (the containers and volumes carrying the sealbench.run
// label on the user's dockerd, VMs behind their tools), and the Engine of
// every remote host in the hosts history (AuditOptions.Hosts). Nothing
// left means an empty Leftovers.
func Audit(ctx context.Context, opts AuditOptions) (*AuditResult, error) {
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	a := &auditor{opts: opts, runs: RunsDir(abs), res: &AuditResult{}, seen: map[string]bool{}, seenPid: map[int]bool{}, ledgerHosts: map[string]bool{}}
	ents, err := os.ReadDir(a.runs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(a.runs, e.Name())
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || manifests.ValidateRunID(e.Name()) != nil {
			if a.opts.wants(TargetLocal) {
				a.add(Resource{Target: TargetLocal, Kind: manifests.ResourceDir, Key: p, Detail: "not a run directory: left by a run stopped before its ledger existed"})
			}
			continue
		}
		a.run(ctx, e.Name(), p)
	}
	// What the label marks on every remote host a run used, the runs
	// gone from here included.
	if err := a.historyHosts(ctx, abs); err != nil {
		return nil, err
	}
	if a.opts.wants(TargetLocal) {
		ms, err := MountsUnder(a.runs)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			a.add(Resource{Target: TargetLocal, Run: runOf(a.runs, m.Point), Kind: manifests.ResourceMount, Key: m.Point, Detail: m.FSType + " mount"})
		}
		for _, p := range FindProcs(argvUnder(a.runs)) {
			if !a.seenPid[p.Pid] {
				a.add(Resource{Target: TargetLocal, Run: runOf(a.runs, argUnder(p.Argv, a.runs)), Kind: manifests.ResourceProcess, Key: "pid " + strconv.Itoa(p.Pid), Detail: strings.Join(p.Argv, " ")})
			}
		}
		// A process is not gone until it has exited: one exiting shows no
		// command line, but still holds what it had open.
		for _, p := range FindExiting(a.runs) {
			if !a.seenPid[p.Pid] {
				a.add(Resource{Target: TargetLocal, Run: runOf(a.runs, p.Holds), Kind: manifests.ResourceProcess, Key: "pid " + strconv.Itoa(p.Pid), Detail: "still alive with no command line (exiting), holding " + p.Holds})
			}
		}
		// A kernel parameter whose holders are all gone without letting
		// go: no ledger names it any more.
		if a.opts.Run == "" {
			if was, value, ok, err := kparam.Lapsed(FUSEURingParam); err != nil {
				a.res.Notes = append(a.res.Notes, fmt.Sprintf("%s not checked: %v", FUSEURingParam, err))
			} else if ok {
				a.add(Resource{Target: TargetLocal, Kind: manifests.ResourceKernelParam, Key: FUSEURingParam,
					Detail: fmt.Sprintf("reads %s, as sealbench runs set it that are gone without letting go (a run directory removed by hand, a process killed); it was %s before them: audit --fix puts %s back", value, was, was)})
			}
		}
	}
	// Whether each labelled run was made here: a run has many Sandboxes,
	// and runs.history is read once per run, not once per Sandbox.
	known := map[string]bool{}
	madeHere := func(run string) bool {
		k, ok := known[run]
		if !ok {
			k = RunKnown(abs, run)
			known[run] = k
		}
		return k
	}
	for _, t := range backendTargets() {
		if !a.opts.wants(t) {
			continue
		}
		found, notes, err := backendOf("", t).Audit(ctx, a.opts.Run)
		if err != nil {
			if a.opts.named(t) {
				return nil, fmt.Errorf("cannot audit %s: %w", t, err)
			}
			notes = append(notes, fmt.Sprintf("not checked: %v", err))
		}
		for _, n := range notes {
			a.res.Notes = append(a.res.Notes, t+": "+n)
		}
		for _, r := range found {
			r.Target = t
			if r.Run != "" && !madeHere(r.Run) {
				r.Foreign = true
				r.Detail = strings.TrimSpace(r.Detail + "; its run was not made in this state directory")
			}
			a.add(r)
		}
	}
	if a.res.Leftovers == nil {
		a.res.Leftovers = []Resource{}
	}
	if a.res.Notes == nil {
		a.res.Notes = []string{}
	}
	sort.SliceStable(a.res.Leftovers, func(i, j int) bool { return a.res.Leftovers[i].Run < a.res.Leftovers[j].Run })
	return a.res, nil
}

// run audits one run directory through its ledger.
func (a *auditor) run(ctx context.Context, id, dir string) {
	entries, _, err := ledger.Read(dir)
	if err != nil {
		if a.opts.wants(TargetLocal) {
			a.add(Resource{Target: TargetLocal, Run: id, Kind: manifests.ResourceDir, Key: dir, Detail: fmt.Sprintf("run directory with an unreadable ledger: %v", err)})
		}
		return
	}
	if busy, pid := InProgress(dir); busy && (a.opts.Run == "" || a.opts.Run == id) {
		a.res.Notes = append(a.res.Notes, fmt.Sprintf("run %s is in progress (pid %d holds its lock): what it holds is in use, listed as found", id, pid))
	}
	held := false
	rh, err := newRemoteHosts(dir, entries, a.opts.SSH)
	if err != nil {
		a.res.Notes = append(a.res.Notes, fmt.Sprintf("run %s: %v: its remote hosts are not checked", id, err))
		rh = &remoteHosts{hosts: map[string]*remoteHost{}}
	}
	defer rh.close()
	for h := range rh.hosts {
		a.ledgerHosts[id+" "+h] = true
	}
	for _, e := range entries {
		if e.Target == "" || !a.opts.wants(e.Target) {
			continue
		}
		if e.Host != "" {
			if a.remote(ctx, rh, id, e) {
				held = true
			}
			continue
		}
		exists, detail, err := Exists(ctx, dir, e)
		if err != nil {
			// Not proven gone, so not gone.
			exists, detail = true, fmt.Sprintf("cannot check: %v", err)
		}
		if e.Kind == manifests.ResourceProcess {
			for _, p := range FindProcs(MarkedBy(e.Exe, e.Key)) {
				a.seenPid[p.Pid] = true
			}
		}
		if exists {
			held = true
			a.add(Resource{Target: e.Target, Run: id, Kind: e.Kind, Key: e.Key, Detail: detail})
		}
	}
	// What carries the run's label on the Engines the ledger names on its
	// hosts: a Sandbox recorded nowhere (a bug) is found there too.
	if a.labelledOnHosts(ctx, rh, id, entries) {
		held = true
	}
	// The run's own entries (its directory, a kernel parameter it
	// changed) count whenever the run is in scope: with no --target, or
	// when one of its targets still holds something.
	for _, e := range entries {
		if e.Target != "" || (len(a.opts.Targets) > 0 && !held) {
			continue
		}
		if e.Host != "" {
			a.remote(ctx, rh, id, e)
			continue
		}
		if exists, detail, err := Exists(ctx, dir, e); err == nil && exists {
			a.add(Resource{Run: id, Kind: e.Kind, Key: e.Key, Detail: detail})
		}
	}
}

// remote audits e, an entry on a remote host, over SSH, and says whether
// it is still there. A host that cannot be reached has not shown its
// resources gone: they count as left, saying why.
func (a *auditor) remote(ctx context.Context, rh *remoteHosts, id string, e manifests.LedgerEntry) bool {
	h, ok := rh.hosts[e.Host]
	if !ok {
		return false
	}
	if h = rh.get(ctx, e.Host); h.done {
		return false
	}
	exists, detail := true, ""
	if h.err == nil && isRunDir(e) {
		// What the runner there recorded, in its ledger in that directory.
		if entries, err := h.ledgerIn(ctx, e.Key); err != nil {
			a.add(Resource{Target: e.Target, Run: id, Host: e.Host, Kind: e.Kind, Key: e.Key, Detail: "cannot read its ledger: " + err.Error()})
		} else {
			for _, re := range entries {
				if !a.opts.wants(re.Target) {
					continue
				}
				ok, d, err := h.exists(ctx, re)
				if err != nil {
					ok, d = true, fmt.Sprintf("cannot check: %v", err)
				}
				if ok {
					a.add(Resource{Target: re.Target, Run: id, Host: re.Host, Kind: re.Kind, Key: re.Key, Detail: d})
				}
			}
		}
	}
	if h.err != nil {
		detail = "cannot check: the host cannot be reached: " + h.err.Error()
	} else {
		var err error
		if exists, detail, err = h.exists(ctx, e); err != nil {
			exists, detail = true, fmt.Sprintf("cannot check: %v", err)
		}
	}
	if exists {
		a.add(Resource{Target: e.Target, Run: id, Host: e.Host, Kind: e.Kind, Key: e.Key, Detail: detail})
	}
	return exists
}

// labelledOnHosts adds the containers and volumes labelled with run id
// on each Engine the ledger names on a reachable remote host, through a
// forward of its socket, and says whether it found any.
func (a *auditor) labelledOnHosts(ctx context.Context, rh *remoteHosts, id string, entries []manifests.LedgerEntry) bool {
	found := false
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Host == "" || !e.Kind.OnEngine() || e.ToolHeld() || !a.opts.wants(e.Target) || seen[e.Host+" "+e.Engine] {
			continue
		}
		seen[e.Host+" "+e.Engine] = true
		h := rh.get(ctx, e.Host)
		if h.err != nil || h.done {
			continue // the entries themselves say so
		}
		fe, err := h.onEngine(ctx, e)
		var rs []Resource
		if err == nil {
			var cli *client.Client
			if cli, err = engine.NewClient(fe.Engine); err == nil {
				rs, err = Labelled(ctx, cli, e.Target, id)
				cli.Close()
			}
		}
		if err != nil {
			a.res.Notes = append(a.res.Notes, fmt.Sprintf("run %s: the Engine %s on %s: %v", id, e.Engine, e.Host, err))
			continue
		}
		for _, r := range rs {
			r.Host = e.Host
			r.Detail = strings.TrimSpace(r.Detail + " on " + e.Engine + " on " + e.Host + ", labelled " + manifests.RunLabel)
			a.add(r)
			found = true
		}
	}
	return found
}

// Exists reports whether the resource of e is still there, with a few
// words about it.
func Exists(ctx context.Context, runDir string, e manifests.LedgerEntry) (bool, string, error) {
	if b := backendOf(runDir, e.Target); b != nil {
		if ok, detail, err := b.Exists(ctx, runDir, e); !errors.Is(err, ErrGeneric) {
			return ok, detail, err
		}
	}
	if e.Kind == manifests.ResourceVM || e.ToolHeld() {
		return false, "", fmt.Errorf("%s of target %q is held by %s: this sealbench has no provisioner for that target", e.Name(), e.Target, e.Exe)
	}
	switch e.Kind {
	case manifests.ResourceMount:
		ms, err := MountsUnder(e.Key)
		if err != nil {
			return false, "", err
		}
		for _, m := range ms {
			if m.Point == e.Key {
				return true, m.FSType + " mount", nil
			}
		}
		return false, "", nil
	case manifests.ResourceStateDir:
		if _, err := os.Lstat(e.Key); err != nil {
			return false, "", nil
		}
		inv, err := inventory.Read(e.Key)
		if err != nil {
			return true, "stand-in state directory (unreadable: " + err.Error() + ")", nil
		}
		d := fmt.Sprintf("stand-in state directory: %d images, %d layers", len(inv.Images), len(inv.Layers))
		if left := inv.Leftovers(); len(left) > 0 {
			d += "; " + strings.Join(left, "; ")
		}
		return true, d, nil
	case manifests.ResourceDir, manifests.ResourceStore, manifests.ResourceSocket:
		fi, err := os.Lstat(e.Key)
		if err != nil {
			return false, "", nil
		}
		switch {
		case fi.IsDir():
			return true, "directory", nil
		case fi.Mode().Type() == fs.ModeSocket:
			return true, "socket", nil
		}
		return true, "file", nil
	case manifests.ResourceProcess:
		ps := append(FindProcs(MarkedBy(e.Exe, e.Key)), exitingBeside(e.Key)...)
		if len(ps) == 0 {
			return false, "", nil
		}
		var pids []string
		for _, p := range ps {
			pids = append(pids, strconv.Itoa(p.Pid))
		}
		return true, "running as pid " + strings.Join(pids, ", "), nil
	case manifests.ResourceKernelParam:
		return kernelParamInEffect(e)
	case manifests.ResourceContainer, manifests.ResourceImage, manifests.ResourceVolume:
		sock, local := runLocalEngine(runDir, e.Engine)
		if local {
			if _, err := os.Stat(sock); err != nil {
				return false, "", nil
			}
		}
		cli, err := engine.NewClient(e.Engine)
		if err != nil {
			return false, "", err
		}
		defer cli.Close()
		switch e.Kind {
		case manifests.ResourceContainer:
			_, err = cli.ContainerInspect(ctx, e.Key)
		case manifests.ResourceImage:
			_, err = cli.ImageInspect(ctx, e.Key)
		case manifests.ResourceVolume:
			_, err = cli.VolumeInspect(ctx, e.Key)
		}
		switch {
		case err == nil:
			return true, "on " + e.Engine, nil
		case cerrdefs.IsNotFound(err), local && engineGone(err):
			return false, "", nil
		}
		return false, "", err
	}
	return false, "", fmt.Errorf("unknown resource kind %q", e.Kind)
}

// argvUnder matches a process with an argument naming a path under dir.
func argvUnder(dir string) func([]string) bool {
	return func(argv []string) bool { return argUnder(argv, dir) != "" }
}

func argUnder(argv []string, dir string) string {
	for _, a := range argv {
		if strings.HasPrefix(a, dir+"/") {
			return a
		}
	}
	return ""
}

// runOf names the run a path under runs belongs to.
func runOf(runs, p string) string {
	rel, err := filepath.Rel(runs, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	return strings.Split(rel, string(filepath.Separator))[0]
}

// Fix tears down what the audit finds: every run through its ledger
// (Teardown), then what no ledger names (what carries the label on the
// hosts of the hosts history, processes, mounts, directories under
// runs/, labelled containers and volumes). It returns the audit
// after fixing, and every failure.
func Fix(ctx context.Context, opts AuditOptions, logf func(string, ...any)) (*AuditResult, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	runs := RunsDir(abs)
	var errs *multierror.Error
	ids, err := ListRuns(abs)
	if err != nil {
		return nil, err
	}
	// Runs in progress (another process holds their lock) are left, and
	// so is everything below that is theirs, unless forced.
	live := map[string]bool{}
	for _, id := range ids {
		if opts.Run != "" && id != opts.Run {
			continue
		}
		dir := filepath.Join(runs, id)
		release, err := TakeOver(dir, opts.Force)
		if ip := (*InProgressError)(nil); errors.As(err, &ip) {
			live[id] = true
			logf("%v", err)
			continue
		} else if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("run %s: %w", id, err))
			continue
		}
		if _, _, err := ledger.Read(dir); err != nil {
			release()
			continue // no usable ledger: handled as a plain directory below
		}
		if _, err := Teardown(ctx, dir, TeardownOptions{Targets: opts.Targets, SSH: opts.SSH, Log: logf}); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("run %s: %w", id, err))
		}
		release()
	}
	if err := fixHistoryHosts(ctx, abs, opts, live, logf); err != nil {
		errs = multierror.Append(errs, err)
	}
	found, err := Audit(ctx, opts)
	if err != nil {
		return nil, err
	}
	// Processes first, then mounts, then directories: nothing is removed
	// while something still uses it.
	order := map[manifests.ResourceKind]int{manifests.ResourceProcess: 0, manifests.ResourceContainer: 1, manifests.ResourceVolume: 2, manifests.ResourceMount: 3}
	sort.SliceStable(found.Leftovers, func(i, j int) bool {
		oi, ok := order[found.Leftovers[i].Kind]
		if !ok {
			oi = 9
		}
		oj, ok := order[found.Leftovers[j].Kind]
		if !ok {
			oj = 9
		}
		return oi < oj
	})
	for _, r := range found.Leftovers {
		if live[r.Run] {
			continue // the run is in progress: it is in use, not left
		}
		if r.Foreign && r.running && !opts.Force {
			// Perhaps another state directory's run, in progress: this
			// one has no lock of it to ask.
			logf("left %s: running, perhaps in progress in another state directory; --force removes it", r)
			continue
		}
		var err error
		switch {
		case r.Kind == manifests.ResourceProcess && strings.HasPrefix(r.Key, "pid "):
			pid, _ := strconv.Atoi(strings.TrimPrefix(r.Key, "pid "))
			if p, ok := procOf(pid); ok {
				err = Kill(ctx, p, argvUnder(runs), ProcessGrace)
			}
		case r.Kind == manifests.ResourceMount:
			err = unmountUnder(r.Key)
		case r.Kind == manifests.ResourceDir && within(r.Key, runs) && r.Key != runs:
			if _, _, lerr := ledger.Read(r.Key); lerr == nil && r.Run != "" {
				continue // a run whose teardown failed: its error is above
			}
			if busy, _ := InProgress(r.Key); busy && !opts.Force {
				continue // a run being made (.new-ID): its process holds the lock
			}
			for _, p := range FindProcs(argvUnder(r.Key)) {
				if kerr := Kill(ctx, p, argvUnder(r.Key), ProcessGrace); kerr != nil {
					errs = multierror.Append(errs, kerr)
				}
			}
			if kerr := killSandboxInits(ctx, r.Key, ProcessGrace); kerr != nil {
				errs = multierror.Append(errs, kerr)
			}
			err = removeTree(r.Key)
		case r.Kind == manifests.ResourceKernelParam && r.Run == "":
			err = kparam.PutBack(r.Key)
		case backendOf("", r.Target) != nil && !r.Kind.IsPath() && r.Kind != manifests.ResourceProcess:
			// A Backend's own finding: its Target is the kind.
			e := manifests.LedgerEntry{RunID: r.Run, Target: r.Target, Kind: r.Kind, Key: r.Key}
			if err = backendOf("", r.Target).Remove(ctx, "/nonexistent", e); errors.Is(err, ErrGeneric) {
				continue
			}
		default:
			continue
		}
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: %w", r, err))
		} else {
			logf("removed %s", r)
		}
	}
	after, err := Audit(ctx, opts)
	if err != nil {
		return nil, err
	}
	return after, listed(errs)
}
