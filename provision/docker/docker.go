// Package docker provisions the docker target: the dockerd the user has,
// found as the docker CLI finds it (DOCKER_HOST, DOCKER_CONTEXT, the
// current context of its config.json, or a context docker@CONTEXT names:
// ResolveEndpoint), with the Sandbox image loaded through the Engine API.
// Sandboxes there are containers with /dev/fuse,
// CAP_SYS_ADMIN and no network (engine.SandboxConfig), labelled
// sealbench.run=<run id>. The dockerd itself is the user's: Create starts
// nothing and Destroy stops nothing but what the run made in it.
package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// Name is the target's name.
const Name = "docker"

var _ provision.Target = (*Docker)(nil)

// Options configures the docker target.
type Options struct {
	Run *runs.Run
	// Host is the dockerd endpoint; empty: the one ResolveEndpoint finds
	// (Context's, when that is set).
	Host string
	// Context is the docker CLI context docker@CONTEXT names; empty: the
	// one the docker CLI would use.
	Context string
	Log     func(format string, args ...any)
	// Target is the target's kind: Name (the default) or GVisorName, whose
	// Sandboxes run under the runsc runtime (gvisor.go).
	Target string
	// Name is the target's name in the run (its ledger entries, samples
	// and pins): docker-colima for docker@colima; empty: Target.
	Name string
}

// Docker is the user's dockerd.
type Docker struct {
	o    Options
	ep   Endpoint
	host string
	kind string // Name or GVisorName
	name string
}

// New returns the docker target of o.Run. It creates nothing.
func New(o Options) (*Docker, error) {
	if o.Run == nil {
		return nil, errors.New("docker target: no run")
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	ep := Endpoint{Host: o.Host, From: "its options"}
	if ep.Host == "" {
		var err error
		if ep, err = ResolveEndpoint(o.Context); err != nil {
			return nil, &provision.InputError{Err: err, Hint: "`docker context ls` lists the contexts; `docker context inspect NAME` shows one"}
		}
	}
	if o.Target == "" {
		o.Target = Name
	}
	name := o.Name
	if name == "" {
		name = o.Target
	}
	return &Docker{o: o, ep: ep, host: ep.Host, kind: o.Target, name: name}, nil
}

func (d *Docker) Name() string     { return d.name }
func (d *Docker) Endpoint() string { return d.host }

func (d *Docker) client() (*client.Client, error) { return engine.NewClient(d.host) }

// Create checks that dockerd answers (and, for gvisor, that it has the
// runsc runtime); there is nothing to start.
func (d *Docker) Create(ctx context.Context) error {
	cli, err := d.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("dockerd at %s does not answer (start it, or choose another with DOCKER_HOST, DOCKER_CONTEXT or docker@CONTEXT; `scripts/dockerd start` runs a private one): %w", d.ep, err)
	}
	if d.kind == GVisorName {
		_, err := gvisorRuntime(ctx, cli, d.host)
		return err
	}
	return nil
}

// InstallImage loads img into dockerd.
func (d *Docker) InstallImage(ctx context.Context, img engine.Image) error {
	cli, err := d.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	return engine.LoadImage(ctx, cli, d.o.Run.Ledger, d.name, d.host, img)
}

// Identity asks dockerd (and, for gvisor, the runsc runtime); the pins
// name the endpoint and the docker context it came from.
func (d *Docker) Identity(ctx context.Context) (*engine.Identity, error) {
	var id *engine.Identity
	var err error
	if d.kind == GVisorName {
		id, err = gvisorIdentity(ctx, d.host)
	} else {
		id, err = engine.Identify(ctx, d.name, d.host)
	}
	if err != nil {
		return nil, err
	}
	if d.ep.Context != "" && d.ep.Context != DefaultContext {
		id.DockerContext = d.ep.Context
	}
	return id, nil
}

// Destroy removes what the run's ledger names on dockerd, then any
// container or volume still labelled with the run (made without a ledger
// entry, by a bug): both steps run, and every failure is returned.
func (d *Docker) Destroy(ctx context.Context) error {
	var errs *multierror.Error
	if _, err := runs.Teardown(ctx, d.o.Run.Dir, runs.TeardownOptions{Targets: []string{d.name}, Log: d.o.Log}); err != nil {
		errs = multierror.Append(errs, err)
	}
	cli, err := d.client()
	if err != nil {
		return multierror.Append(errs, err).ErrorOrNil()
	}
	defer cli.Close()
	rs, err := runs.Labelled(ctx, cli, d.name, d.o.Run.ID)
	if err != nil {
		if client.IsErrConnectionFailed(err) && errs.ErrorOrNil() == nil && len(d.o.Run.Ledger.Entries()) <= 1 {
			return nil // never created: nothing of ours can be there
		}
		return multierror.Append(errs, err).ErrorOrNil()
	}
	for _, r := range rs {
		var err error
		if r.Kind == "container" {
			err = cli.ContainerRemove(ctx, r.Key, container.RemoveOptions{Force: true, RemoveVolumes: true})
		} else {
			err = cli.VolumeRemove(ctx, r.Key, true)
		}
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: %w", r, err))
		}
	}
	return errs.ErrorOrNil()
}

// Inventory lists what of the run dockerd holds: ledger entries that
// still exist, and containers and volumes carrying the run's label.
func (d *Docker) Inventory(ctx context.Context) ([]runs.Resource, error) {
	out, err := d.o.Run.Held(ctx, d.name)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range out {
		seen[string(r.Kind)+" "+r.Key] = true
	}
	cli, err := d.client()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rs, err := runs.Labelled(ctx, cli, d.name, d.o.Run.ID)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if !seen[string(r.Kind)+" "+r.Key] {
			out = append(out, r)
		}
	}
	return out, nil
}
