package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/manifests"
)

// FUSEURingParam is the fuse module's switch for FUSE over io_uring
// (layerfs/uring.ParamPath: provision links no LayerFS, and builds for
// macOS, where that package does not). It is kernel-wide and off by
// default; it exists only on kernels built with CONFIG_FUSE_IO_URING
// (6.14+).
const FUSEURingParam = "/sys/module/fuse/parameters/enable_uring"

// sysRoot is put before a kernel parameter's path to read or write it:
// empty on a host; tests point it at a directory shaped like /sys, so
// that only one test on the machine changes the real parameter.
var sysRoot = ""

// ErrLeftAsIs is what removing a resource answers when it is no longer
// the run's to undo: a kernel parameter that someone has changed again
// since the run set it. Teardown reports it as a warning and goes on.
var ErrLeftAsIs = errors.New("left as it is")

// ReadKernelParam reads a module parameter (/sys/module/M/parameters/P),
// trimmed of its newline.
func ReadKernelParam(path string) (string, error) {
	b, err := os.ReadFile(sysRoot + path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// HostKernel is this host's kernel release (uname -r): what an Engine on
// this host reports as its kernel.
func HostKernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// SetKernelParam changes the kernel parameter path (a module parameter in
// sysfs) to value for the rest of the run: it reads what the parameter is,
// records that and value in the run's ledger (durably, before anything
// changes), then writes value; teardown writes the old value back. It
// records the change even when the parameter reads value already, so that
// the ledger says what the run relied on, and returns the old value.
func (r *Run) SetKernelParam(path, value, detail string) (previous string, err error) {
	previous, err = ReadKernelParam(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if err := r.Ledger.Record(manifests.LedgerEntry{Kind: manifests.ResourceKernelParam, Key: path, Value: value, Previous: previous, Detail: detail}); err != nil {
		return previous, err
	}
	if previous == value {
		return previous, nil
	}
	if err := os.WriteFile(sysRoot+path, []byte(value), 0o644); err != nil {
		return previous, fmt.Errorf("setting %s to %s (it is %s): %w", path, value, previous, err)
	}
	return previous, nil
}

// restoreKernelParam puts back what e's parameter was before the run
// changed it, while it still reads what the run set; a parameter that
// reads something else was changed again by someone else since, and is
// left as it is (ErrLeftAsIs); one that is gone (its module unloaded) has
// nothing to put back.
func restoreKernelParam(e manifests.LedgerEntry) error {
	cur, err := ReadKernelParam(e.Key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case cur == e.Previous:
		return nil
	case cur != e.Value:
		return fmt.Errorf("%s reads %s, not the %s this run set (it was %s before): someone changed it since, so it is %w",
			e.Key, cur, e.Value, e.Previous, ErrLeftAsIs)
	}
	if err := os.WriteFile(sysRoot+e.Key, []byte(e.Previous), 0o644); err != nil {
		return fmt.Errorf("putting %s back to %s: %w", e.Key, e.Previous, err)
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
