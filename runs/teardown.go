package runs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
)

// TeardownOptions says what Teardown removes and how.
type TeardownOptions struct {
	// Targets limits teardown to these targets' entries; the run's own
	// directory (and so its ledger) is removed only when Targets is empty.
	Targets []string
	// Remove removes one entry's resource, returning nil when it is
	// absent; nil means RemoveResource. Tests wrap it to inject failures.
	Remove func(ctx context.Context, runDir string, e manifests.LedgerEntry) error
	// Log receives a line per step; nil discards them.
	Log func(format string, args ...any)
	// Grace is how long a process has between SIGTERM and SIGKILL (default 10s).
	Grace time.Duration
	// SSH overrides how hosts.json says the run's remote hosts are reached.
	SSH SSHOptions
}

// TeardownResult says what Teardown did.
type TeardownResult struct {
	Run      string   `json:"run"`
	Removed  []string `json:"removed"`  // every entry handled: removed, or already absent
	Kept     []string `json:"kept"`     // the run directory, kept because a step failed
	Warnings []string `json:"warnings"` // a cut-off ledger line, say
	// Unreachable are the remote hosts teardown could not reach, with
	// what is left on each: a later teardown of the run finishes them.
	Unreachable []UnreachableHost `json:"unreachable,omitempty"`
	// InProgress, when set, says why the run was left as it is: another
	// process holds its lock (teardown --all without --force).
	InProgress string `json:"inProgress,omitempty"`
}

// UnreachableHost is a remote host teardown could not reach.
type UnreachableHost struct {
	Host   string   `json:"host"`
	Reason string   `json:"reason"`
	Left   []string `json:"left"` // the ledger's entries there, newest first
}

// ProcessGrace is how long a process of ours has to exit after SIGTERM.
const ProcessGrace = 10 * time.Second

// Teardown removes every resource runDir's ledger names, newest first
// (a kernel parameter the run changed is put back as it was, after the
// Sandboxes and targets recorded after it are gone). It keeps going past
// failures and returns them all together
// (*multierror.Error), each naming its resource. The run directory, which
// holds the ledger, goes last and only when everything else went, so a
// failed teardown can be run again. A run directory that does not exist is
// torn down already: Teardown is safe to run twice. Teardown does not look
// at the run's lock: it is the run's own process's call (its rollback, its
// end), and another command takes the lock first (TakeOver).
func Teardown(ctx context.Context, runDir string, opts TeardownOptions) (*TeardownResult, error) {
	res := &TeardownResult{Run: filepath.Base(runDir)}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	remove := opts.Remove
	if remove == nil {
		remove = func(ctx context.Context, runDir string, e manifests.LedgerEntry) error {
			return RemoveResource(ctx, runDir, e, opts.Grace)
		}
	}
	entries, warnings, err := ledger.Read(runDir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(runDir); errors.Is(statErr, fs.ErrNotExist) {
			return res, nil
		}
		return res, fmt.Errorf("run directory %s has no ledger: remove it with `sealbench audit --fix` once nothing is mounted under it", runDir)
	}
	if err != nil {
		return res, fmt.Errorf("run %s: %w", res.Run, err)
	}
	for _, w := range warnings {
		res.Warnings = append(res.Warnings, w.Error())
		logf("warning: %v", w)
	}
	want := map[string]bool{}
	for _, t := range opts.Targets {
		want[t] = true
	}
	var errs *multierror.Error
	// Entries on remote hosts are removed over SSH, each host reached
	// once; on one that cannot be reached, everything of the run is left
	// and said so, for a later teardown.
	rh, err := newRemoteHosts(runDir, entries, opts.SSH)
	if err != nil {
		return res, fmt.Errorf("run %s: %w", res.Run, err)
	}
	defer rh.close()
	if rh.ssh.LogDir == "" {
		rh.ssh.LogDir = remoteLogDir(runDir)
	}
	onHost := map[string][]string{} // what teardown is to remove on each host, newest first
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Host != "" && (len(want) == 0 || want[e.Target]) {
			onHost[e.Host] = append(onHost[e.Host], e.Name())
		}
	}
	hostFailed := map[string]bool{}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if len(want) > 0 && !want[e.Target] {
			continue
		}
		if e.Host != "" {
			if err := ctx.Err(); err != nil {
				errs = multierror.Append(errs, err)
				break
			}
			errs = removeRemote(ctx, rh, e, onHost, hostFailed, len(want) == 0, res, errs, opts.Grace, logf)
			continue
		}
		if e.Target == "" && e.Kind == manifests.ResourceDir && e.Key == runDir && errs.ErrorOrNil() != nil {
			res.Kept = append(res.Kept, e.Key)
			logf("keeping %s: the steps above failed; run teardown again once they are fixed", e.Key)
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = multierror.Append(errs, err)
			break
		}
		err := remove(ctx, runDir, e)
		if errors.Is(err, ErrStillHeld) {
			res.Removed = append(res.Removed, e.Name())
			logf("let go of %s: %v", e.Name(), err)
			continue
		}
		if errors.Is(err, ErrLeftAsIs) {
			res.Warnings = append(res.Warnings, err.Error())
			logf("warning: %v", err)
			continue
		} else if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s (%s, ledger seq %d): %w", e.Name(), targetName(e.Target), e.Seq, err))
			logf("FAILED %s: %v", e.Name(), err)
			continue
		}
		res.Removed = append(res.Removed, e.Name())
		logf("removed %s", e.Name())
	}
	return res, listed(errs)
}

// removeRemote removes e, an entry on a remote host, over SSH, and
// appends to errs what fails. When the last entry of a host is handled
// without a failure, and the whole run is torn down (all), hosts.json
// says the host is done.
func removeRemote(ctx context.Context, rh *remoteHosts, e manifests.LedgerEntry, onHost map[string][]string, hostFailed map[string]bool, all bool,
	res *TeardownResult, errs *multierror.Error, grace time.Duration, logf func(string, ...any)) *multierror.Error {
	name := e.Name() + " on " + e.Host
	h := rh.get(ctx, e.Host)
	left := onHost[e.Host]
	onHost[e.Host] = left[1:]
	switch {
	case h.done:
		res.Removed = append(res.Removed, name)
		return errs
	case h.err != nil:
		if !hostFailed[e.Host] {
			hostFailed[e.Host] = true
			res.Unreachable = append(res.Unreachable, UnreachableHost{Host: e.Host, Reason: h.err.Error(), Left: left})
			logf("FAILED %s: cannot be reached: %v", e.Host, h.err)
			return multierror.Append(errs, h.unreachable(left))
		}
		return errs
	}
	var err error
	if all && !h.ledgersDone {
		// First what the runner there recorded, newest first: its
		// Sandboxes are newer than anything the host recorded there
		// before starting it (the image they run), and the run's
		// directory on the host holds its ledger.
		h.ledgersDone = true
		for _, d := range h.runDirs {
			if err = removeRemoteLedger(ctx, h, d, res, grace, logf); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = h.remove(ctx, e, grace)
	}
	if err != nil {
		hostFailed[e.Host] = true
		logf("FAILED %s: %v", name, err)
		errs = multierror.Append(errs, fmt.Errorf("%s (%s, ledger seq %d): %w", name, targetName(e.Target), e.Seq, err))
	} else {
		res.Removed = append(res.Removed, name)
		logf("removed %s", name)
	}
	if len(onHost[e.Host]) == 0 && !hostFailed[e.Host] && all {
		if err := markTornDown(rh.runDir, e.Host); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("recording that %s is torn down: %w", e.Host, err))
		}
	}
	return errs
}

// removeRemoteLedger removes, newest first, what the ledger in dir on
// h names, and returns every failure.
func removeRemoteLedger(ctx context.Context, h *remoteHost, dir string, res *TeardownResult, grace time.Duration, logf func(string, ...any)) error {
	entries, err := h.ledgerIn(ctx, dir)
	if err != nil {
		return err
	}
	var errs *multierror.Error
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		name := e.Name() + " on " + e.Host
		if err := h.remove(ctx, e, grace); err != nil {
			logf("FAILED %s: %v", name, err)
			errs = multierror.Append(errs, fmt.Errorf("%s (%s, seq %d of the ledger on the host): %w", name, targetName(e.Target), e.Seq, err))
			continue
		}
		res.Removed = append(res.Removed, name)
		logf("removed %s", name)
	}
	if errs != nil {
		return fmt.Errorf("what the ledger in %s names: %w", dir, listed(errs))
	}
	return nil
}

func targetName(t string) string {
	if t == "" {
		return "the run"
	}
	return "target " + t
}

// RemoveResource removes what e names, and returns nil when it is absent.
// Paths outside runDir are refused: a ledger only ever names what lies in
// its own run directory.
func RemoveResource(ctx context.Context, runDir string, e manifests.LedgerEntry, grace time.Duration) error {
	if grace <= 0 {
		grace = ProcessGrace
	}
	if e.Kind.IsPath() && !within(e.Key, runDir) {
		return fmt.Errorf("%s lies outside the run directory %s: not touching it", e.Key, runDir)
	}
	if b := backendOf(runDir, e.Target); b != nil {
		if err := b.Remove(ctx, runDir, e); !errors.Is(err, ErrGeneric) {
			return err
		}
	}
	if e.Kind == manifests.ResourceVM || e.ToolHeld() {
		return fmt.Errorf("%s of target %q is held by %s: this sealbench has no provisioner for that target", e.Name(), e.Target, e.Exe)
	}
	switch e.Kind {
	case manifests.ResourceDir, manifests.ResourceStore:
		return removeTree(e.Key)
	case manifests.ResourceStateDir:
		if err := killSandboxInits(ctx, e.Key, grace); err != nil {
			return err
		}
		return removeTree(e.Key)
	case manifests.ResourceSocket:
		if err := os.Remove(e.Key); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case manifests.ResourceMount:
		return unmountUnder(e.Key)
	case manifests.ResourceProcess:
		match := MarkedBy(e.Exe, e.Key)
		var errs *multierror.Error
		// Kill returns once each has exited; one exiting already shows
		// no command line, and is waited for too.
		for _, p := range append(FindProcs(match), exitingBeside(e.Key)...) {
			if err := Kill(ctx, p, match, grace); err != nil {
				errs = multierror.Append(errs, err)
			}
		}
		return errs.ErrorOrNil()
	case manifests.ResourceContainer, manifests.ResourceImage, manifests.ResourceVolume:
		return removeOnEngine(ctx, runDir, e)
	case manifests.ResourceKernelParam:
		return restoreKernelParam(runDir, e)
	}
	return fmt.Errorf("unknown resource kind %q", e.Kind)
}

// exitingBeside lists the exiting processes (FindExiting) holding a file
// in the directory of a process marker that is a path (the stand-in's
// state directory, QEMU's pid file): a process of the entry's that shows
// no command line any more, but has not exited.
func exitingBeside(marker string) []Proc {
	if !filepath.IsAbs(marker) || filepath.Dir(marker) == "/" {
		return nil
	}
	return FindExiting(filepath.Dir(marker))
}

// runLocalEngine reports whether endpoint is a unix socket in runDir: a
// stand-in of this run, whose containers die with it and whose images go
// with its state directory.
func runLocalEngine(runDir, endpoint string) (string, bool) {
	p, ok := strings.CutPrefix(endpoint, "unix://")
	return p, ok && within(p, runDir)
}

// RemoveOnEngine removes the container, image or volume e names from the
// Engine at e.Engine, and returns nil when it is not there: for a Backend
// whose audit finds what no ledger names.
func RemoveOnEngine(ctx context.Context, e manifests.LedgerEntry) error {
	return removeOnEngine(ctx, "/nonexistent", e)
}

func removeOnEngine(ctx context.Context, runDir string, e manifests.LedgerEntry) error {
	sock, local := runLocalEngine(runDir, e.Engine)
	if local {
		if _, err := os.Stat(sock); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	cli, err := engine.NewClient(e.Engine)
	if err != nil {
		return err
	}
	defer cli.Close()
	switch e.Kind {
	case manifests.ResourceContainer:
		err = cli.ContainerRemove(ctx, e.Key, container.RemoveOptions{Force: true, RemoveVolumes: true})
	case manifests.ResourceImage:
		_, err = cli.ImageRemove(ctx, e.Key, image.RemoveOptions{PruneChildren: true})
		if cerrdefs.IsConflict(err) {
			err = fmt.Errorf("still in use by a container (remove it, or run teardown for the run that made it): %w", err)
		}
	case manifests.ResourceVolume:
		err = cli.VolumeRemove(ctx, e.Key, true)
	}
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case local && engineGone(err):
		return nil // the stand-in has stopped: its state directory goes next
	case engineGone(err):
		return fmt.Errorf("the Engine at %s does not answer, so %s cannot be removed: start it again and rerun teardown: %w", e.Engine, e.Name(), err)
	}
	return err
}

// killSandboxInits stops the stand-in's Sandbox inits still running for
// stateDir (a stand-in killed with SIGKILL leaves them): each carries its
// root, under stateDir, as its second argument.
func killSandboxInits(ctx context.Context, stateDir string, grace time.Duration) error {
	match := sandboxInitOf(stateDir)
	var errs *multierror.Error
	for _, p := range FindProcs(match) {
		if err := Kill(ctx, p, match, grace); err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	return errs.ErrorOrNil()
}

// sandboxInitOf matches the Sandbox inits of the stand-in whose state
// directory is stateDir: each carries its root, under stateDir, as its
// second argument.
func sandboxInitOf(stateDir string) func([]string) bool {
	return func(argv []string) bool {
		return len(argv) >= 2 && argv[0] == "standin-sandbox-init" && within(argv[1], stateDir)
	}
}

// ListErrors formats a multierror as one error, or a count and one indented
// line per error (nested lists indented further), with no blank lines.
func ListErrors(es []error) string {
	if len(es) == 1 {
		return es[0].Error()
	}
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = "  - " + strings.ReplaceAll(strings.TrimRight(e.Error(), "\n"), "\n", "\n    ")
	}
	return fmt.Sprintf("%d errors:\n%s", len(es), strings.Join(lines, "\n"))
}

// listed returns errs as an error formatted by ListErrors, or nil.
func listed(errs *multierror.Error) error {
	if errs == nil || len(errs.Errors) == 0 {
		return nil
	}
	errs.ErrorFormat = ListErrors
	return errs
}
