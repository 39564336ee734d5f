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
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
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
// hosts.json first (runs.RecordHost), so that teardown reaches it.
type Docker struct {
	forwarded
}

// NewDocker returns the docker@ssh target of o.Run on o.SSH's host. It
// creates nothing.
func NewDocker(o provision.RemoteOptions) (*Docker, error) {
	f, err := newForwarded("docker@ssh", o)
	if err != nil {
		return nil, err
	}
	return &Docker{forwarded: f}, nil
}

// forwarded is what the remote targets keep here: their directory in the
// run, and in it the forward of their Engine's socket on the host.
type forwarded struct {
	o      provision.RemoteOptions
	engine string // the Engine, as the host sees it: unix:///...
	fwd    *sshx.Forward
}

func newForwarded(kind string, o provision.RemoteOptions) (forwarded, error) {
	switch {
	case o.Run == nil:
		return forwarded{}, fmt.Errorf("%s target: no run", kind)
	case o.SSH == nil:
		return forwarded{}, fmt.Errorf("%s target: no connection to its host", kind)
	case !manifests.ValidTargetName(o.Name):
		return forwarded{}, fmt.Errorf("%s target: %q is not a target name", kind, o.Name)
	}
	if err := manifests.ValidateSSHHost(o.Host); err != nil {
		return forwarded{}, fmt.Errorf("%s target: %w", kind, err)
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return forwarded{o: o}, nil
}

func (f *forwarded) Name() string { return f.o.Name }

// Endpoint is the forward of the host's Engine in the run directory.
func (f *forwarded) Endpoint() string { return "unix://" + f.sock() }

// HostEndpoint is the Engine as the host sees it (unix:///...), what a
// runner on the host reaches; empty before Create.
func (f *forwarded) HostEndpoint() string { return f.engine }

func (f *forwarded) dir() string  { return filepath.Join(f.o.Run.Dir, f.o.Name) }
func (f *forwarded) sock() string { return filepath.Join(f.dir(), "sock", "engine.sock") }

// checkSock refuses a forward's socket path too long for a unix socket.
func (f *forwarded) checkSock(kind string) error {
	if len(f.sock()) > maxSocketPath {
		return fmt.Errorf("the forward's socket %s is longer than a unix socket path may be (%d bytes): give the target a shorter name (NAME=%s@%s), or use a shorter state directory (%s)",
			f.sock(), maxSocketPath, kind, f.o.Host, runs.StateDirEnv)
	}
	return nil
}

// forward records the target's directory here and the forward's socket
// in it, and forwards the Engine at endpoint on the host (unix:///...)
// there, through dial where the host's sshd forwards no sockets.
func (f *forwarded) forward(ctx context.Context, endpoint string, dial ...string) error {
	for _, e := range []manifests.LedgerEntry{
		{Target: f.o.Name, Kind: manifests.ResourceDir, Key: f.dir(), Detail: "the " + f.o.Name + " target's directory"},
		{Target: f.o.Name, Kind: manifests.ResourceSocket, Key: f.sock(), Detail: endpoint + " on " + f.o.Host + ", forwarded"},
	} {
		if err := f.o.Run.Ledger.Record(e); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(f.sock()), 0o700); err != nil {
		return err
	}
	f.engine = endpoint
	var err error
	if f.fwd, err = f.o.SSH.ForwardUnixOrCommand(ctx, f.sock(), strings.TrimPrefix(endpoint, "unix://"), dial...); err != nil {
		return fmt.Errorf("forwarding %s on %s: %w", endpoint, f.o.Host, err)
	}
	return nil
}

// closeForward closes the forward, if any.
func (f *forwarded) closeForward() {
	if f.fwd != nil {
		f.fwd.Close()
		f.fwd = nil
	}
}

// InstallImage loads img into the host's Engine, recording it with the
// host and the Engine as the host sees it.
func (f *forwarded) InstallImage(ctx context.Context, img engine.Image) error {
	if f.fwd == nil {
		return errors.New(f.o.Name + " target: InstallImage before Create")
	}
	cli, err := engine.NewClient(f.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	return engine.LoadImage(ctx, cli, onHost{f.o.Run.Ledger, f.o.Host}, f.o.Name, f.engine, img)
}

// Identity asks the host's Engine, through the forward.
func (f *forwarded) Identity(ctx context.Context) (*engine.Identity, error) {
	id, err := engine.Identify(ctx, f.o.Name, f.Endpoint())
	if err != nil {
		return nil, err
	}
	id.Transport, id.Host = TransportSSH, f.o.Host
	return id, nil
}

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
	if err := d.checkSock("docker"); err != nil {
		return err
	}
	if err := d.forward(ctx, ep, "docker", "-H", ep, "system", "dial-stdio"); err != nil {
		return err
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

// onHost records entries as the host's.
type onHost struct {
	rec  engine.Recorder
	host string
}

func (o onHost) Record(e manifests.LedgerEntry) error {
	e.Host = o.host
	return o.rec.Record(e)
}

// Retract takes back the host's entry of e's resource, when the ledger
// can.
func (o onHost) Retract(e manifests.LedgerEntry, why string) error {
	r, ok := o.rec.(engine.Retracter)
	if !ok {
		return nil
	}
	e.Host = o.host
	return r.Retract(e, why)
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
	if _, err := runs.Teardown(ctx, d.o.Run.Dir, runs.TeardownOptions{Targets: []string{d.o.Name}, Log: d.o.Log}); err != nil {
		errs = multierror.Append(errs, err)
	}
	d.closeForward()
	return errs.ErrorOrNil()
}

func (d *Docker) removeLabelled(ctx context.Context) error {
	cli, err := engine.NewClient(d.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	rs, err := runs.Labelled(ctx, cli, d.o.Name, d.o.Run.ID)
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
func (d *Docker) Inventory(ctx context.Context) ([]runs.Resource, error) {
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
	rs, err := runs.Labelled(ctx, cli, d.o.Name, d.o.Run.ID)
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

var (
	_ provision.LeftUp = (*Docker)(nil)
	_ provision.LeftUp = (*Local)(nil)
)

// Reach is what reaches the host's dockerd once provision has exited and
// its forward with it: DOCKER_HOST=ssh://USER@HOST:PORT, over which the
// docker CLI runs the user's own ssh and `docker system dial-stdio` on
// the host, whose sessions' DOCKER_HOST is the Engine the target found.
// HOST is the name the spec gave (an ssh_config alias), so that the
// user's ssh reads the configuration sealbench read.
func (d *Docker) Reach() (endpoint, forward string, err error) {
	h, err := reachHost(d.o)
	if err != nil {
		return "", "", err
	}
	return h.String(), "", nil
}

// reachHost is how the user's own ssh reaches o's host: its user and
// port, and the host as the spec named it (an alias of ~/.ssh/config,
// whose HostName, IdentityFile and ProxyJump that ssh then reads too).
func reachHost(o provision.RemoteOptions) (*Host, error) {
	h, err := parseHost(o.Host)
	if err != nil {
		return nil, err
	}
	if o.SSH != nil {
		if cfg := o.SSH.Config(); cfg.Alias != "" {
			h.Host = cfg.Alias
		}
	}
	return h, nil
}

// Reach is what reaches the stand-in once provision has exited: it stays
// up on the host (a session of its own), its socket reachable only
// through a forward, so the endpoint is this forward's socket and the
// forward the user's ssh command line that makes it again.
func (l *Local) Reach() (endpoint, forward string, err error) {
	h, err := reachHost(l.o)
	if err != nil {
		return "", "", err
	}
	if l.engine == "" {
		return "", "", fmt.Errorf("%s is not up: no Engine on %s yet", l.o.Name, l.o.Host)
	}
	return l.Endpoint(), ForwardCommand(h, l.sock(), strings.TrimPrefix(l.engine, "unix://")), nil
}

// ForwardCommand is the ssh command line that forwards localSock (a unix
// socket here, replaced if a stale one is left) to hostSock on h, in the
// foreground, running nothing there.
func ForwardCommand(h *Host, localSock, hostSock string) string {
	return fmt.Sprintf("ssh -p %d -o StreamLocalBindUnlink=yes -o ExitOnForwardFailure=yes -nNT -L %s:%s %s@%s",
		h.Port, localSock, hostSock, h.User, h.Host)
}
