package provision

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
)

// Registration is everything sealbench knows about one target, in one
// place: its package registers it (Register) from init, and the commands,
// teardown, the audit and the doctor read it from here. A new target is
// one package and one line in package provision/targets.
type Registration struct {
	Name string // local, docker, ...: what --target and the samples call it
	What string // what the target is, in a line
	// Order is where the target is listed (help, doctor): DESIGN.md's order.
	Order int
	// Root says the target needs root on this host.
	Root bool
	// HostKernel says the target's Sandboxes run on this host's kernel
	// (local; docker, when its dockerd is this host's), so that what the
	// host's kernel parameters say (enable_uring) holds for them too.
	HostKernel bool
	// New makes the target's provisioner for a run, from a verified bundle
	// and its Sandbox image. It creates nothing.
	New func(NewOptions) (Target, error)
	// Remote, when not nil, makes the target's provisioner on a remote
	// host, reached through an SSH connection (KIND@ssh://USER@HOST, see
	// docs/design/remote-hosts.md). Nil: the target cannot run on another
	// host, and a spec naming one is refused before anything starts.
	Remote func(RemoteOptions) (Target, error)
	// Backend, when not nil, reaches what the target holds outside the
	// run directory and its Engines' ledger entries (VMs, a tool's images,
	// labelled containers): for teardown, the audit and --fix.
	Backend runs.Backend
	// Needs names the doctor's checks (Check.Name) the target needs here;
	// Note says more about it in the doctor's list.
	Needs []string
	Note  string
	// Tools, for a target that drives a command-line tool, names the
	// releases it drives, for the help: "container 1.0.0 to 1.2.2".
	Tools string
	// Checks, when not nil, are doctor checks only the target's package
	// can make (its own tool, with what to install), run after the host's.
	Checks func(ctx context.Context) []Check
	// Param, when not empty, says what the target takes after its kind
	// and a ':' in a --target (kubernetes:RUNTIMECLASS: "RUNTIMECLASS");
	// empty: a parameter is refused.
	Param string
	// At, when not empty, says what the target takes as a bare name
	// after an '@' in a --target: "NODE" for a node of a cluster
	// (kubernetes@NODE: its Sandboxes go there, and targets on different
	// nodes sample in parallel), "CONTEXT" for a docker CLI context
	// (docker@CONTEXT). Empty: only a host (@ssh://...) may follow.
	At string
	// Options make the target's own options, at their defaults: the
	// flags the commands add for it (see Options). Options of a kind
	// another target makes too are made once.
	Options []func() Options
	// Subcommands are the hidden commands its provisioner starts as
	// processes of a run.
	Subcommands []Subcommand
	// Help says more of the target than What, for provision's help: what
	// it brings up, what it needs; a few lines, wrapped.
	Help string
	// Examples are command lines that show the target, for the help of
	// run ("sealbench run ...") and provision ("sealbench provision ..."),
	// each with a comment line above it where one helps.
	Examples []string
}

// NewOptions is what a target's provisioner is made from.
type NewOptions struct {
	Run *runs.Run
	// Name is the target's name in the run's samples, pins and ledger, as
	// the --target gives it (kubernetes-worker-1, docker-gpu1); empty or
	// the kind for a target of this host named by its kind.
	Name string
	// Bundle is the verified bundle directory; Manifest its manifest and
	// BundleName its name (build-linux-<hash>).
	Bundle     string
	Manifest   *manifests.BundleManifest
	BundleName string
	Image      engine.Image // the bundle's Sandbox image
	// Param is what the --target gave after the kind and a ':'
	// (Registration.Param), empty when nothing.
	Param string
	// Node is the bare name the --target gave after an '@'
	// (Registration.At): a node of a cluster, or a docker context; empty:
	// the target's default.
	Node string
	// Options are the command's targets' options (its flags), each
	// target reading its own kind with OptionsOf.
	Options OptionSet
	Log     func(string, ...any)
}

// RemoteOptions is what a target's provisioner on a remote host is made
// from: what NewOptions says (the bundle is this host's verified copy),
// the name the target has in this run, and the connection to its host.
type RemoteOptions struct {
	NewOptions // its Name is the spec's (docker-gpu1), never the kind alone
	// Host is the host in canonical form, ssh://user@host:port: what the
	// ledger records with every entry on it.
	Host string
	SSH  *sshx.Client
}

// RemoteKinds lists the targets that can run on a remote host, in Order.
func RemoteKinds() []string {
	var ns []string
	for _, r := range Registered() {
		if r.Remote != nil {
			ns = append(ns, r.Name)
		}
	}
	return ns
}

var (
	registryMu sync.Mutex
	registry   = map[string]*Registration{}
)

// Register makes r the registration of target r.Name. It panics when the
// name has one already, or r lacks a name or a constructor: both are bugs.
func Register(r Registration) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if r.Name == "" || r.New == nil {
		panic(fmt.Sprintf("provision: registration %+v lacks a name or New", r))
	}
	if _, dup := registry[r.Name]; dup {
		panic(fmt.Sprintf("provision: target %q registered twice", r.Name))
	}
	registry[r.Name] = &r
	if r.Backend != nil {
		runs.RegisterBackend(r.Name, r.Order, r.Backend)
	}
}

// Lookup returns the registration of target name.
func Lookup(name string) (*Registration, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	r, ok := registry[name]
	return r, ok
}

// Registered lists every registered target, in Order.
func Registered() []*Registration {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]*Registration, 0, len(registry))
	for _, r := range registry {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Names lists the registered targets' names, in Order.
func Names() []string {
	var ns []string
	for _, r := range Registered() {
		ns = append(ns, r.Name)
	}
	return ns
}

// unregister removes a registration: for tests.
func unregister(name string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	delete(registry, name)
}

// InputError is a problem with what the user gave a provisioner (a bundle
// without the stand-in, say): the commands exit with the unusable-input
// code, and say Hint.
type InputError struct {
	Err  error
	Hint string
}

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }
