package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/kparam"
	"github.com/sealbench/sealbench/manifests"
)

// FUSEURingParam is the fuse module's switch for FUSE over io_uring
// (layerfs/uring.ParamPath: provision links no LayerFS, and builds for
// macOS, where that package does not). It is kernel-wide and off by
// default; it exists only on kernels built with CONFIG_FUSE_IO_URING
// (6.14+).
const FUSEURingParam = "/sys/module/fuse/parameters/enable_uring"

// ErrLeftAsIs is what removing a resource answers when it is no longer
// the run's to undo: a kernel parameter that someone has changed again
// since the run set it. Teardown reports it as a warning and goes on.
var ErrLeftAsIs = errors.New("left as it is")

// ReadKernelParam reads a module parameter (/sys/module/M/parameters/P),
// trimmed of its newline.
func ReadKernelParam(path string) (string, error) { return kparam.Read(path) }

// HostKernel is this host's kernel release (uname -r): what an Engine on
// this host reports as its kernel.
func HostKernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// ErrStillHeld is what restoring a kernel parameter answers when other
// runs (or tests) on this machine still rely on what it was set to: the
// run has let go of it, and the last of them puts it back.
var ErrStillHeld = errors.New("still held")

// SetKernelParam changes the kernel parameter path (a module parameter in
// sysfs) to value for the rest of the run, and returns what it was before
// anyone on this machine set it. Several runs can rely on one parameter
// at once (internal/kparam keeps who holds it): the first to hold it
// changes it, and the last to let go puts it back. The change, with what
// it was, is recorded durably in the run's ledger before anything
// changes, even when the parameter reads value already, so that the
// ledger says what the run relied on.
func (r *Run) SetKernelParam(path, value, detail string) (previous string, err error) {
	previous, err = kparam.Hold(path, value, kparam.RunHolder(r.Dir), func(was string) error {
		return r.Ledger.Record(manifests.LedgerEntry{Kind: manifests.ResourceKernelParam, Key: path, Value: value, Previous: was, Detail: detail})
	})
	if err != nil && previous == "" {
		return "", fmt.Errorf("holding %s: %w", path, err)
	}
	return previous, err
}

// restoreKernelParam lets go of the run in runDir's hold on e's
// parameter. While other runs hold it, it is left as they need it
// (ErrStillHeld). The last to let go puts back what it was, while it
// still reads what the run set; one that reads something else was
// changed again by someone else since, and is left as it is
// (ErrLeftAsIs); one that is gone (its module unloaded) has nothing to
// put back.
func restoreKernelParam(runDir string, e manifests.LedgerEntry) error {
	others, err := kparam.Release(e.Key, e.Value, e.Previous, kparam.RunHolder(runDir))
	switch {
	case errors.Is(err, kparam.ErrChanged):
		return fmt.Errorf("%v, so it is %w", err, ErrLeftAsIs)
	case err != nil:
		return err
	case len(others) > 0:
		names := make([]string, len(others))
		for i, h := range others {
			names[i] = h.String()
		}
		return fmt.Errorf("%s left at %s: %s %w by %s, and the last to let go puts %s back",
			filepath.Base(e.Key), e.Value, filepath.Base(e.Key), ErrStillHeld, strings.Join(names, ", "), e.Previous)
	}
	return nil
}

// kernelParamInEffect reports whether the change e records is still in
// effect: the parameter reads what the run set, and that differs from
// what it was.
func kernelParamInEffect(e manifests.LedgerEntry) (bool, string, error) {
	if e.Value == e.Previous {
		return false, "", nil
	}
	cur, err := ReadKernelParam(e.Key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, "", nil
	case err != nil:
		return false, "", err
	case cur != e.Value:
		return false, "", nil
	}
	return true, fmt.Sprintf("%s reads %s, as this run set it (it was %s): teardown puts %s back", filepath.Base(e.Key), cur, e.Previous, e.Previous), nil
}
