package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// backend is the qemu target's runs.Backend. It takes the VM's
// entry (kind vm, key <run>/qemu/vm): QEMU, found by its command line
// (the binary the entry names, with the pid file in that directory as an
// argument; the pid in the pid file must be one of them), is stopped,
// then the directory (disk overlay, bundle disk, pid file) removed.
// Everything else of the target (the link process, the sockets, the
// target's directory) is plain and left to the generic code.
type backend struct{}

var _ runs.Backend = backend{}

// vmDir checks that e is a VM entry of this target: an absolute, clean
// path named vm in a directory named qemu.
func vmDir(e manifests.LedgerEntry) (string, bool, error) {
	if e.Kind != manifests.ResourceVM {
		return "", false, nil
	}
	k := e.Key
	if !filepath.IsAbs(k) || filepath.Clean(k) != k || filepath.Base(k) != "vm" || filepath.Base(filepath.Dir(k)) != Name {
		return "", false, fmt.Errorf("qemu: %q is not a qemu target's VM directory: not touching it", k)
	}
	return k, true, nil
}

// procs are the QEMU processes of the VM directory dir: exe's, with dir's
// pid file as an argument. A pid file that names another process is an
// error: it was not this VM's.
func procs(exe, dir string) ([]runs.Proc, error) {
	pidfile := filepath.Join(dir, "qemu.pid")
	ps := runs.FindProcs(runs.MarkedBy(exe, pidfile))
	b, err := os.ReadFile(pidfile)
	if err != nil || len(ps) == 0 {
		return ps, nil // no pid file (not written yet, or QEMU is gone): the command line is the proof
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return ps, nil
	}
	for _, p := range ps {
		if p.Pid == pid {
			return ps, nil
		}
	}
	return ps, fmt.Errorf("%s names pid %d, which is not %s with that pid file (%d such processes)", pidfile, pid, exe, len(ps))
}

func (backend) Remove(ctx context.Context, _ string, e manifests.LedgerEntry) error {
	dir, ok, err := vmDir(e)
	if !ok {
		return orGeneric(err)
	}
	ps, perr := procs(e.Exe, dir)
	var errs []error
	if perr != nil {
		errs = append(errs, perr)
	}
	match := runs.MarkedBy(e.Exe, filepath.Join(dir, "qemu.pid"))
	// Kill returns once each has exited; a QEMU already exiting (no
	// command line left, its disks still open) is waited for too.
	for _, p := range append(ps, runs.FindExiting(dir)...) {
		if err := runs.Kill(ctx, p, match, runs.ProcessGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

func (backend) Exists(_ context.Context, _ string, e manifests.LedgerEntry) (bool, string, error) {
	dir, ok, err := vmDir(e)
	if !ok {
		return false, "", orGeneric(err)
	}
	ps, _ := procs(e.Exe, dir)
	ps = append(ps, runs.FindExiting(dir)...)
	_, serr := os.Stat(dir)
	if errors.Is(serr, os.ErrNotExist) && len(ps) == 0 {
		return false, "", nil
	}
	d := "QEMU VM directory"
	if serr != nil {
		d += " (gone)"
	}
	for _, p := range ps {
		d += ", QEMU pid " + strconv.Itoa(p.Pid)
	}
	return true, d, nil
}

// Audit adds nothing: every QEMU and link of a run names paths under the
// run directory, where the generic audit finds them.
func (backend) Audit(context.Context, string) ([]runs.Resource, []string, error) {
	return nil, nil, nil
}

func orGeneric(err error) error {
	if err != nil {
		return err
	}
	return runs.ErrGeneric
}
