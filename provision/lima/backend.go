package lima

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// backend is the lima target's runs.Backend: teardown, the audit and
// --fix reach Lima VMs through it wherever this package is linked in.
type backend struct{}

var _ runs.Backend = backend{}

// checkKey refuses a vm key that is not a run's Lima directory (or an
// instance in one) under a directory named sealbench-lima: keys come from
// ledgers and the audit, and Remove deletes what they name.
func checkKey(e manifests.LedgerEntry) (layout, bool, error) {
	if !filepath.IsAbs(e.Key) || filepath.Clean(e.Key) != e.Key {
		return layout{}, false, fmt.Errorf("lima: %q is not an absolute, clean path", e.Key)
	}
	l, isInstance := layoutOf(e.Key)
	if isInstance && filepath.Base(e.Key) != Instance {
		return layout{}, false, fmt.Errorf("lima: %s is not a sealbench Lima instance (%s)", e.Key, Instance)
	}
	if filepath.Base(filepath.Dir(l.root)) != dirBase || manifests.ValidateRunID(filepath.Base(l.root)) != nil {
		return layout{}, false, fmt.Errorf("lima: %s is not a run's directory under a %s directory: not touching it", l.root, dirBase)
	}
	if e.RunID != "" && filepath.Base(l.root) != e.RunID {
		return layout{}, false, fmt.Errorf("lima: %s belongs to run %s, not %s: not touching it", e.Key, filepath.Base(l.root), e.RunID)
	}
	return l, isInstance, nil
}

// ctlFor is the limactl of a run's Lima directory: the ledger entry's
// tool, else what the directory's state.json records; exe is empty when
// neither says (an entry the audit made for a half-made directory), and
// removal then goes without limactl.
func ctlFor(l layout, exe string) *limactl {
	c := &limactl{l: l, log: io.Discard, uid: Unprivileged, gid: Unprivileged}
	if os.Geteuid() != 0 {
		c.uid, c.gid = os.Geteuid(), os.Getegid()
	}
	if st, err := readState(l); err == nil {
		c.exe, c.uid, c.gid = st.Limactl, st.UID, st.GID
	}
	if exe != "" {
		c.exe = exe
	}
	return c
}

// Remove removes a run's Lima directory or its instance; the Engine's
// images and containers in a VM that no longer answers went with it.
func (backend) Remove(ctx context.Context, _ string, e manifests.LedgerEntry) error {
	switch {
	case e.Kind == manifests.ResourceVM:
		l, isInstance, err := checkKey(e)
		if err != nil {
			return err
		}
		if isInstance {
			return removeInstance(ctx, ctlFor(l, e.Exe))
		}
		return removeLimaDir(ctx, l, e.Exe)
	case e.Kind.OnEngine():
		if engineGone(e.Engine) {
			return nil
		}
	}
	return runs.ErrGeneric
}

// removeLimaDir removes a run's whole Lima directory: its instance first
// (with limactl when it can), then whatever still runs with an argument
// under it, then the directory.
func removeLimaDir(ctx context.Context, l layout, exe string) error {
	var errs []error
	if err := removeInstance(ctx, ctlFor(l, exe)); err != nil {
		errs = append(errs, err)
	}
	if err := killUnder(ctx, l.root); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(l.root); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", l.root, err))
	}
	if err := removePSL(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// engineGone reports whether endpoint is the Engine socket of a Lima VM
// of ours that does not answer: its images and containers are inside the
// VM's disk, which the VM's own entry removes.
func engineGone(endpoint string) bool {
	sock, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || !strings.HasPrefix(sock, Dir()+string(filepath.Separator)) {
		return false
	}
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// Exists reports whether a run's Lima directory or instance is still
// there, with the processes it runs.
func (backend) Exists(_ context.Context, _ string, e manifests.LedgerEntry) (bool, string, error) {
	switch {
	case e.Kind == manifests.ResourceVM:
		l, isInstance, err := checkKey(e)
		if err != nil {
			return false, "", err
		}
		dir, what := l.root, "Lima directory"
		if isInstance {
			dir, what = l.instDir, "Lima instance"
		}
		ps := procsUnder(dir)
		if !exists(dir) && len(ps) == 0 {
			return false, "", nil
		}
		return true, describe(what, dir, ps), nil
	case e.Kind.OnEngine():
		if engineGone(e.Engine) {
			return false, "", nil
		}
	}
	return false, "", runs.ErrGeneric
}

func describe(what, dir string, ps []runs.Proc) string {
	d := what
	if !exists(dir) {
		d += " (its directory is gone)"
	}
	if len(ps) > 0 {
		var pids []string
		for _, p := range ps {
			pids = append(pids, strconv.Itoa(p.Pid))
		}
		d += ", processes " + strings.Join(pids, ", ")
	}
	return d
}

// Audit lists every run's Lima directory under Dir(), every process with
// an argument under Dir() (a hostagent, QEMU or ssh outliving its
// directory), and lima-psl-* directories Lima's hostagent leaves in /tmp
// that belong to the unprivileged user.
func (backend) Audit(_ context.Context, run string) ([]runs.Resource, []string, error) {
	var found []runs.Resource
	var notes []string
	root := Dir()
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("listing %s: %w", root, err)
	}
	// One look at the processes for the whole audit: two would disagree
	// about one that started or ended between them.
	all := procsUnder(root)
	seen := map[int]bool{}
	for _, e := range ents {
		if run != "" && e.Name() != run {
			continue
		}
		l := newLayout(filepath.Join(root, e.Name()))
		var ps []runs.Proc
		under := argUnder(l.root)
		for _, p := range all {
			if under(p.Argv) {
				ps = append(ps, p)
			}
		}
		for _, p := range ps {
			seen[p.Pid] = true
		}
		r := runs.Resource{Run: e.Name(), Kind: manifests.ResourceVM, Key: l.root, Detail: describe("Lima directory", l.root, ps)}
		if manifests.ValidateRunID(e.Name()) != nil || !e.IsDir() {
			r.Run, r.Detail = "", "not a run's Lima directory: remove it by hand"
		}
		found = append(found, r)
	}
	for _, p := range all {
		if seen[p.Pid] {
			continue
		}
		r := runs.Resource{Kind: manifests.ResourceProcess, Key: "pid " + strconv.Itoa(p.Pid), Detail: strings.Join(p.Argv, " ")}
		for _, a := range p.Argv {
			if i := strings.Index(a, root+string(filepath.Separator)); i >= 0 {
				r.Run = strings.SplitN(a[i+len(root)+1:], string(filepath.Separator), 2)[0]
				break
			}
		}
		if run != "" && r.Run != run {
			continue
		}
		found = append(found, r)
	}
	if run == "" {
		psl, err := pslDirs()
		if err != nil {
			notes = append(notes, fmt.Sprintf("lima-psl-* in /tmp not checked: %v", err))
		}
		for _, p := range psl {
			found = append(found, runs.Resource{Kind: manifests.ResourceDir, Key: p,
				Detail: "left by a Lima hostagent (port forwarding); removed with any run's Lima directory, or remove it by hand once no limactl runs"})
		}
	}
	return found, notes, nil
}

// pslDirs lists the lima-psl-* directories in /tmp (where Lima's
// hostagent makes them) owned by the user limactl runs as.
func pslDirs() ([]string, error) {
	ms, err := filepath.Glob("/tmp/lima-psl-*")
	if err != nil {
		return nil, err
	}
	uid := os.Geteuid()
	if uid == 0 {
		uid = Unprivileged
	}
	var out []string
	for _, m := range ms {
		fi, err := os.Lstat(m)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			out = append(out, m)
		}
	}
	return out, nil
}

// removePSL removes the lima-psl-* directories of the unprivileged user
// once no hostagent of ours runs at all (they are named by port, not by
// run, so one in use cannot be told apart).
func removePSL(context.Context) error {
	if len(procsUnder(Dir())) > 0 {
		return nil
	}
	ds, err := pslDirs()
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range ds {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
