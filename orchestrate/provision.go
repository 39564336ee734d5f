package orchestrate

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
)

// bringUp makes spec's provisioner for run (on its remote host, over the
// run's connection there), creates the target, installs the Sandbox image
// and asks its identity.
func bringUp(ctx context.Context, spec remote.Spec, run *runs.Run, conns *hostConns, b *Bundle, opts provision.OptionSet, logf func(string, ...any)) (provision.Target, *engine.Identity, error) {
	reg, ok := provision.Lookup(spec.Kind)
	if !ok {
		return nil, nil, fmt.Errorf("no provisioner for target %q", spec.Kind)
	}
	no := provision.NewOptions{Run: run, Bundle: b.Dir, Manifest: b.Verified.Manifest, BundleName: b.Verified.Name, Image: b.Image,
		Name: spec.Name, Param: spec.Param, Node: spec.Node, Options: opts, Log: logf}
	var t provision.Target
	var err error
	switch {
	case spec.Host == nil:
		// A name that is not the kind (kubernetes@NODE's) is recorded
		// with its kind before the target records anything: teardown
		// finds its Backend by it.
		if err = runs.RecordTargetKind(run.Dir, spec.Name, spec.Kind); err == nil {
			t, err = reg.New(no)
		}
	case reg.Remote == nil || conns == nil:
		err = fmt.Errorf("target %s: %s cannot run on a remote host here", spec, spec.Kind)
	default:
		var c *sshx.Client
		if c, err = conns.get(ctx, spec.Host); err == nil {
			t, err = reg.Remote(provision.RemoteOptions{NewOptions: no, Host: spec.Host.String(), SSH: c})
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if err := t.Create(ctx); err != nil {
		return nil, nil, fmt.Errorf("bringing up %s: %w", t.Name(), err)
	}
	logf("%s is up at %s; loading %s", t.Name(), t.Endpoint(), b.Image.Ref)
	if err := t.InstallImage(ctx, b.Image); err != nil {
		return nil, nil, fmt.Errorf("installing the Sandbox image into %s: %w", t.Name(), err)
	}
	id, err := t.Identity(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("asking %s for its identity: %w", t.Name(), err)
	}
	return t, id, nil
}

// ProvisionOptions says which target to bring up, from which bundle.
type ProvisionOptions struct {
	Target string
	// Remote is the target's spec when it is on a remote host (docker@ssh
	// or local@ssh: see Provision), reached as SSH says.
	Remote *remote.Spec
	// Param is what the target's spec gave after its kind and a ':'
	// (kubernetes:RUNTIMECLASS), for a target on this host; Node the
	// node after its '@' (kubernetes@NODE), and Kind then its kind (Target
	// is its name, kubernetes-NODE).
	Param  string
	Node   string
	Kind   string
	SSH    SSH
	Bundle *Bundle
	// Options are the targets' own options (provision.Flags).
	Options  provision.OptionSet
	StateDir string // empty: runs.DefaultStateDir
	Log      func(string, ...any)

	// FUSEURing is what the run does with the host's enable_uring (FUSE
	// over io_uring) for its targets on this host's kernel: the zero
	// value, FUSEURingOff, leaves it and serves LayerFS over /dev/fuse;
	// the CLI's default is FUSEURingAuto. Every target's pins say what
	// LayerFS could use, either way.
	FUSEURing FUSEURing
}

// Provisioned is a target left up: what `provision --json` prints.
type Provisioned struct {
	Run      string           `json:"run"`
	RunDir   string           `json:"runDir"`
	Target   string           `json:"target"`
	Endpoint string           `json:"endpoint"`
	Identity *engine.Identity `json:"identity"`
	Bundle   string           `json:"bundle"`
	Image    engine.Image     `json:"image"`
	// Host is the remote host the target is on (ssh://user@host:port);
	// Endpoint is then what reaches its Engine from here after provision
	// exits: for docker@ssh, DOCKER_HOST for the docker CLI, which runs
	// the ssh you have; for local@ssh, a socket in the run directory that
	// exists while Forward (an ssh command line, your ssh) runs.
	Host string `json:"host,omitempty"`
	// Forward is the ssh command that carries Endpoint to the stand-in's
	// socket on the host (local@ssh only): its Engine is reached through
	// a forward, and provision's own dies with it.
	Forward string `json:"forward,omitempty"`
}

// Provision brings one target up in a new run and leaves it up. On
// failure, what the run made is torn down again.
func Provision(ctx context.Context, o ProvisionOptions) (_ *Provisioned, err error) {
	logf := orNop(o.Log)
	run, err := newRun(o.StateDir)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	logf("run %s in %s", run.ID, run.Dir)
	defer func() {
		if err == nil {
			return
		}
		// Rollback on failure only: take down what this run made.
		if _, terr := runs.Teardown(context.WithoutCancel(ctx), run.Dir, runs.TeardownOptions{Log: logf}); terr != nil {
			err = multierror.Append(err, fmt.Errorf("and tearing the failed run down: %w (run `sealbench teardown --run %s`)", terr, run.ID))
		}
	}()
	uring, err := setupFUSEURing(run, o.FUSEURing, []string{o.Target}, "", logf)
	if err != nil {
		return nil, err
	}
	spec, conns := remote.Spec{Name: o.Target, Kind: o.Target, Param: o.Param, Node: o.Node}, (*hostConns)(nil)
	if o.Kind != "" {
		spec.Kind = o.Kind
	}
	if o.Remote != nil {
		spec, conns = *o.Remote, newHostConns(run, o.SSH, logf)
		// The forward dies with this process; what the run made on the
		// host is in the ledger and its hosts.json, for teardown.
		defer conns.close()
	}
	t, id, err := bringUp(ctx, spec, run, conns, o.Bundle, o.Options, logf)
	if err != nil {
		return nil, err
	}
	pinFUSEURing(id, spec.Host == nil && onHostKernel(spec.Kind, ""), uring)
	out := &Provisioned{Run: run.ID, RunDir: run.Dir, Target: spec.Name, Endpoint: t.Endpoint(), Identity: id, Bundle: o.Bundle.Verified.Name, Image: o.Bundle.Image}
	if spec.Host != nil {
		// Provision's forward dies with it: the target says what reaches
		// its Engine afterwards.
		lu, ok := t.(provision.LeftUp)
		if !ok {
			return nil, fmt.Errorf("target %s: %w", spec, provision.ErrNotLeftUp)
		}
		if out.Endpoint, out.Forward, err = lu.Reach(); err != nil {
			return nil, fmt.Errorf("target %s: %w", spec, err)
		}
		out.Host = spec.Host.String()
		id.Endpoint = out.Endpoint
	}
	return out, nil
}

func newRun(state string) (*runs.Run, error) {
	if state == "" {
		state = runs.DefaultStateDir()
	}
	run, err := runs.NewRun(state)
	if err != nil {
		return nil, fmt.Errorf("starting a run in %s (set %s to use another directory): %w", state, runs.StateDirEnv, err)
	}
	return run, nil
}

func orNop(f func(string, ...any)) func(string, ...any) {
	if f == nil {
		return func(string, ...any) {}
	}
	return f
}
