package remote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/sshx"
)

// TransportSSH is what a remote target's pins say of how its Engine is
// reached from this host: over the SSH connection.
const TransportSSH = "ssh"

// DefaultDockerHost is the Engine of a host whose sessions set no
// DOCKER_HOST.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// maxSocketPath is the longest path a unix socket may have on Linux
// (sun_path, less its NUL).
const maxSocketPath = 107

var _ provision.Target = (*Docker)(nil)

// Docker is docker@ssh: the dockerd of a remote host, its Engine API
// reached over the run's SSH connection to that host, as the docker CLI
// reaches it for DOCKER_HOST=ssh://: its socket forwarded into the run
// directory (or, where the host's sshd forwards no sockets, `docker
// system dial-stdio` there). Create starts nothing on the host and
// Destroy stops nothing but what the run made in its dockerd.
//
// The ledger records what the run makes in that dockerd with the host
// and the Engine as the host sees it, never the forward, which dies with
// the run; whoever makes the connection records the host in the run's
// hosts.json first (provision.RecordHost), so that teardown reaches it.
type Docker struct {
	o      provision.RemoteOptions
	engine string // the host's dockerd, as the host sees it: unix:///...
	fwd    *sshx.Forward
}

// NewDocker returns the docker@ssh target of o.Run on o.SSH's host. It
// creates nothing.
func NewDocker(o provision.RemoteOptions) (*Docker, error) {
	switch {
	case o.Run == nil:
		return nil, errors.New("docker@ssh target: no run")
	case o.SSH == nil:
		return nil, errors.New("docker@ssh target: no connection to its host")
	case !manifests.ValidTargetName(o.Name):
		return nil, fmt.Errorf("docker@ssh target: %q is not a target name", o.Name)
	}
	if err := manifests.ValidateSSHHost(o.Host); err != nil {
		return nil, fmt.Errorf("docker@ssh target: %w", err)
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return &Docker{o: o}, nil
}

func (d *Docker) Name() string { return d.o.Name }

// Endpoint is the forward of the host's dockerd in the run directory.
func (d *Docker) Endpoint() string { return "unix://" + d.sock() }

func (d *Docker) dir() string  { return filepath.Join(d.o.Run.Dir, d.o.Name) }
func (d *Docker) sock() string { return filepath.Join(d.dir(), "sock", "engine.sock") }

// Create asks the host which dockerd its sessions use (DOCKER_HOST there,
// or the default socket), forwards it into the run directory, and checks
// that it answers. A target already up is left as it is.
func (d *Docker) Create(ctx context.Context) error {
	if d.fwd != nil {
		return d.ping(ctx)
	}
	out, err := d.o.SSH.Exec(ctx, sshx.Command{Name: "docker-host", Argv: []string{"sh", "-c", `printf '%s\n' "${DOCKER_HOST:-` + DefaultDockerHost + `}"`}})
	if err != nil {
		return err
	}
	ep := strings.TrimSpace(string(out))
	if !strings.HasPrefix(ep, "unix:///") {
		return fmt.Errorf("the dockerd of %s is at %q: sealbench reaches a remote dockerd through its unix socket (DOCKER_HOST=unix:///...)", d.o.Host, ep)
	}
	d.engine = ep
	if len(d.sock()) > maxSocketPath {
		return fmt.Errorf("the forward's socket %s is longer than a unix socket path may be (%d bytes): give the target a shorter name (NAME=docker@%s), or use a shorter state directory (%s)",
			d.sock(), maxSocketPath, d.o.Host, provision.StateDirEnv)
	}
	for _, e := range []manifests.LedgerEntry{
		{Target: d.o.Name, Kind: manifests.ResourceDir, Key: d.dir(), Detail: "the docker@ssh target's directory"},
		{Target: d.o.Name, Kind: manifests.ResourceSocket, Key: d.sock(), Detail: ep + " on " + d.o.Host + ", forwarded"},
	} {
		if err := d.o.Run.Ledger.Record(e); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(d.sock()), 0o700); err != nil {
		return err
	}
	if d.fwd, err = provision.ForwardEngine(ctx, d.o.SSH, d.sock(), ep); err != nil {
		return fmt.Errorf("forwarding the dockerd of %s: %w", d.o.Host, err)
	}
	return d.ping(ctx)
}

func (d *Docker) ping(ctx context.Context) error {
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("the dockerd at %s on %s does not answer (start it there, or set DOCKER_HOST for %s's sessions): %w", d.engine, d.o.Host, d.o.SSH.Config().User, err)
	}
	return nil
}

// InstallImage loads img into the host's dockerd, recording it with the
// host and the Engine as the host sees it.
func (d *Docker) InstallImage(ctx context.Context, img engine.Image) error {
	if d.fwd == nil {
		return errors.New("docker@ssh target: InstallImage before Create")
	}
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	return engine.LoadImage(ctx, cli, onHost{d.o.Run.Ledger, d.o.Host}, d.o.Name, d.engine, img)
}

// onHost records entries as the host's.
type onHost struct {
	rec  engine.Recorder
	host string
}

func (o onHost) Record(e manifests.LedgerEntry) error {
	e.Host = o.host
	return o.rec.Record(e)
}

// Identity asks the host's dockerd, through the forward.
func (d *Docker) Identity(ctx context.Context) (*engine.Identity, error) {
	id, err := engine.Identify(ctx, d.o.Name, d.Endpoint())
	if err != nil {
		return nil, err
	}
	id.Transport, id.Host = TransportSSH, d.o.Host
	return id, nil
}

// Destroy removes what carries the run's label in the host's dockerd,
// then what the run's ledger names of the target (through the run's
// hosts.json for what is on the host), then the forward: every step
// runs, and every failure is returned.
func (d *Docker) Destroy(ctx context.Context) error {
	var errs *multierror.Error
	if d.fwd != nil {
		if err := d.removeLabelled(ctx); err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	if _, err := provision.Teardown(ctx, d.o.Run.Dir, provision.TeardownOptions{Targets: []string{d.o.Name}, Log: d.o.Log}); err != nil {
		errs = multierror.Append(errs, err)
	}
	if d.fwd != nil {
		d.fwd.Close()
		d.fwd = nil
	}
	return errs.ErrorOrNil()
}

func (d *Docker) removeLabelled(ctx context.Context) error {
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	rs, err := provision.Labelled(ctx, cli, d.o.Name, d.o.Run.ID)
	if err != nil {
		return err
	}
	var errs *multierror.Error
	for _, r := range rs {
		if r.Kind == manifests.ResourceContainer {
			err = cli.ContainerRemove(ctx, r.Key, container.RemoveOptions{Force: true, RemoveVolumes: true})
		} else {
			err = cli.VolumeRemove(ctx, r.Key, true)
		}
		if err != nil && !client.IsErrNotFound(err) {
			errs = multierror.Append(errs, fmt.Errorf("%s on %s: %w", r, d.o.Host, err))
		}
	}
	return errs.ErrorOrNil()
}

// Inventory lists what of the run the target holds: the ledger's entries
// that still exist (on the host, over SSH), and what carries the run's
// label in the host's dockerd.
func (d *Docker) Inventory(ctx context.Context) ([]provision.Resource, error) {
	out, err := d.o.Run.Held(ctx, d.o.Name)
	if err != nil || d.fwd == nil {
		return out, err
	}
	seen := map[string]bool{}
	for _, r := range out {
		seen[string(r.Kind)+" "+r.Key] = true
	}
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rs, err := provision.Labelled(ctx, cli, d.o.Name, d.o.Run.ID)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if !seen[string(r.Kind)+" "+r.Key] {
			r.Host = d.o.Host
			out = append(out, r)
		}
	}
	return out, nil
}
