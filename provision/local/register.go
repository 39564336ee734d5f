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
		Help: `The stand-in runs from the bundle's own binary (copied into the run and
checked against the manifest), its socket in a private directory of the run;
each Sandbox a set of Linux namespaces. Needs root.
local@ssh://root@HOST[:PORT] is the bundle's stand-in on that host, copied,
checked and started there as root; provision leaves it up in a session of
its own and prints the ssh -L command (your ssh) that forwards its socket.`,
		Examples: []string{
			"  # The main job: local and docker, a native reference beside each sample (6 samples each)\n  sudo sealbench run --target local,docker --native",
			"  sudo sealbench provision local --bundle out/build-linux-0123456789ab",
			"  # The bundle's stand-in on a remote host; run the ssh -L command it prints, then use its endpoint:\n  sealbench provision local@ssh://root@10.0.0.7 --bundle out/build-linux-0123456789ab",
		},
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
