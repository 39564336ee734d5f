package local

import (
	"fmt"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "the Engine API stand-in on this host", Order: 10, Root: true, HostKernel: true,
		New: fromBundle,
		// local@ssh://root@HOST: the bundle's stand-in run as root there.
		Remote: func(o provision.RemoteOptions) (provision.Target, error) { return remote.NewLocal(o) },
		Needs:  []string{"root", "fuse"},
	})
}

// fromBundle makes the local target from a verified bundle: the stand-in
// that runs is checked against the manifest's digest of it.
func fromBundle(o provision.NewOptions) (provision.Target, error) {
	f, ok := o.Manifest.File(StandinBundlePath())
	if !ok {
		return nil, &provision.InputError{Err: fmt.Errorf("bundle %s has no %s", o.BundleName, StandinBundlePath()),
			Hint: "seal a bundle with the stand-in (sealbench seal)"}
	}
	return New(Options{Run: o.Run, Bundle: o.Bundle, Standin: f.Digest, Log: o.Log})
}
