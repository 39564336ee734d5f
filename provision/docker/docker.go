// Package docker provisions the docker target: the dockerd the user has
// (DOCKER_HOST, or the default socket), with the Sandbox image loaded
// through the Engine API. Sandboxes there are containers with /dev/fuse,
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
	// Host is the dockerd endpoint; empty means DOCKER_HOST or the default socket.
	Host string
	Log  func(format string, args ...any)
	// Target is the target's name: Name (the default) or GVisorName, whose
	// Sandboxes run under the runsc runtime (gvisor.go).
	Target string
}

// Docker is the user's dockerd.
type Docker struct {
	o    Options
	host string
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
	host := o.Host
	if host == "" {
		host = engine.DefaultDockerHost()
	}
	if o.Target == "" {
		o.Target = Name
	}
	return &Docker{o: o, host: host, name: o.Target}, nil
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
		return fmt.Errorf("dockerd at %s does not answer (start it, or set DOCKER_HOST; `scripts/dockerd start` runs a private one): %w", d.host, err)
	}
	if d.name == GVisorName {
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

// Identity asks dockerd (and, for gvisor, the runsc runtime).
func (d *Docker) Identity(ctx context.Context) (*engine.Identity, error) {
	if d.name == GVisorName {
		return gvisorIdentity(ctx, d.host)
	}
	return engine.Identify(ctx, d.name, d.host)
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
