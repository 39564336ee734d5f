package remote

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
)

// DefaultHostStateDir is the state directory on a host whose sessions set
// no SEALBENCH_STATE_DIR: a run's files there are in
// /var/lib/sealbench/remote/<tag>/<run>/ (runs.HostRunDir), apart from the
// host's own runs/ and from the run's directory on every other host.
const DefaultHostStateDir = "/var/lib/sealbench"

var _ provision.Target = (*Local)(nil)

// Local is local@ssh: the bundle's Engine API stand-in on a remote host,
// run there as root from the verified bundle's bytes and reached over the
// run's SSH connection to that host.
//
// Create copies the stand-in for the host's platform into the run's
// directory there and checks it (HostBundle), starts it in a session of
// its own (so that it outlives the SSH session that started it; its argv
// carries its state directory, which is its marker), and forwards its
// socket into the run directory here (or, where the host's sshd forwards
// no sockets, runs `standin dial` there for each connection). On the
// host, a run's local@ssh target lives in
// $SEALBENCH_STATE_DIR/remote/<tag>/<run>/<target> (runs.HostRunDir;
// SEALBENCH_STATE_DIR as the host's sessions have it, or
// /var/lib/sealbench):
//
//	bundle/             the stand-in and its SHA256SUMS line, checked there
//	sock/standin.sock   its Engine API socket (the directory is 0700)
//	state/              its state: images, layers, Sandboxes
//	standin.log         its output
//
// Every one of them is in the run's ledger here, with the host, before it
// exists; the run's directory on the host is the run's (no target), for
// a whole-run teardown to remove.
type Local struct {
	forwarded
	// ReadyTimeout bounds the wait for the stand-in to make its socket
	// and answer (default 30s).
	ReadyTimeout time.Duration
	// On the host: the run's directory, the target's, its bundle
	// directory, the stand-in's binary, state, socket and log.
	hostRun, dir, bundle, bin, state, socket, logp string
}

// NewLocal returns the local@ssh target of o.Run on o.SSH's host, from
// the verified bundle o.Bundle. It creates nothing.
func NewLocal(o provision.RemoteOptions) (*Local, error) {
	f, err := newForwarded("local@ssh", o)
	if err != nil {
		return nil, err
	}
	if o.Manifest == nil || o.Bundle == "" {
		return nil, errors.New("local@ssh target: no verified bundle")
	}
	return &Local{forwarded: f, ReadyTimeout: 30 * time.Second}, nil
}

// Create installs and starts the stand-in on the host, forwards its
// socket here and checks that it answers. A target already up is left as
// it is.
func (l *Local) Create(ctx context.Context) error {
	if l.fwd != nil {
		return l.ping(ctx)
	}
	if err := l.checkSock("local"); err != nil {
		return err
	}
	if err := l.needRoot(ctx); err != nil {
		return err
	}
	p, err := Platform(ctx, l.o.SSH)
	if err != nil {
		return err
	}
	if p.OS != "linux" {
		return fmt.Errorf("%s runs %s: the stand-in runs on Linux only", l.o.Host, p.OS)
	}
	if err := l.paths(ctx); err != nil {
		return err
	}
	for _, e := range []manifests.LedgerEntry{
		{Kind: manifests.ResourceDir, Key: l.hostRun, Detail: "the run's directory on the host"},
		{Target: l.o.Name, Kind: manifests.ResourceDir, Key: l.dir, Detail: "the " + l.o.Name + " target's directory on the host"},
	} {
		if err := l.record(e); err != nil {
			return err
		}
	}
	if _, err := l.o.SSH.Exec(ctx, sshx.Command{Name: "mkdir", Argv: []string{"sh", "-c", `umask 077 && mkdir -p -- "$1" "$2" && chmod 0700 -- "$1" "$2"`, "sh", l.dir, path.Dir(l.socket)}}); err != nil {
		return err
	}
	standin := "bin/" + p.Dir() + "/standin"
	hb := HostBundle{SSH: l.o.SSH, Host: l.o.Host, Target: l.o.Name, Bundle: l.o.Bundle, Manifest: l.o.Manifest, Files: []string{standin}, Dir: l.bundle}
	if err := hb.Install(ctx, l.o.Run.Ledger); err != nil {
		return err
	}
	l.bin = path.Join(l.bundle, standin)
	for _, e := range []manifests.LedgerEntry{
		{Kind: manifests.ResourceStateDir, Key: l.state, Detail: "the stand-in's state"},
		{Kind: manifests.ResourceSocket, Key: l.socket, Detail: "the stand-in's Engine API socket"},
		{Kind: manifests.ResourceProcess, Key: l.state, Exe: l.bin, Detail: "standin serve"},
	} {
		e.Target = l.o.Name
		if err := l.record(e); err != nil {
			return err
		}
	}
	if err := l.start(ctx); err != nil {
		return err
	}
	if err := l.forward(ctx, "unix://"+l.socket, l.bin, "dial", "--socket", l.socket); err != nil {
		return err
	}
	return l.waitReady(ctx)
}

func (l *Local) record(e manifests.LedgerEntry) error {
	e.Host = l.o.Host
	return l.o.Run.Ledger.Record(e)
}

// needRoot refuses a login other than root's: the stand-in makes
// namespaces and mounts, and its socket admits only its own uid
// (SO_PEERCRED).
func (l *Local) needRoot(ctx context.Context) error {
	out, err := l.o.SSH.Exec(ctx, sshx.Command{Name: "id", Argv: []string{"id", "-u"}})
	if err != nil {
		return err
	}
	if uid := strings.TrimSpace(string(out)); uid != "0" {
		return fmt.Errorf("local@ssh runs the stand-in as root on %s, and %s is uid %s there: the stand-in makes namespaces and mounts, and its socket admits its own uid only; log in as root (local@ssh://root@...)",
			l.o.Host, l.o.SSH.Config().User, uid)
	}
	return nil
}

// paths asks the host for its state directory and sets the target's
// paths there.
func (l *Local) paths(ctx context.Context) error {
	state, err := HostStateDir(ctx, l.o.SSH)
	if err != nil {
		return err
	}
	l.hostRun = runs.HostRunDir(state, l.o.Run.ID, l.o.Host)
	l.dir = path.Join(l.hostRun, l.o.Name)
	l.bundle = path.Join(l.dir, "bundle")
	l.state = path.Join(l.dir, "state")
	l.socket = path.Join(l.dir, "sock", "standin.sock")
	l.logp = path.Join(l.dir, "standin.log")
	if len(l.socket) > maxSocketPath {
		return fmt.Errorf("the stand-in's socket %s on %s is longer than a unix socket path may be (%d bytes): give the target a shorter name (NAME=local@%s), or set a shorter %s for the host's sessions",
			l.socket, l.o.Host, maxSocketPath, l.o.Host, runs.StateDirEnv)
	}
	return nil
}

// HostStateDir asks the host for its state directory: SEALBENCH_STATE_DIR
// as its sessions have it, or DefaultHostStateDir.
func HostStateDir(ctx context.Context, c *sshx.Client) (string, error) {
	return hostPath(ctx, c, runs.StateDirEnv, DefaultHostStateDir)
}

// LockEnv names the host-wide lock of a host, as its sessions have it;
// unset, it is the runner's default (/run/lock/sealbench.lock). Hosts
// that share one kernel, as the tests' fake hosts do, each set their own.
const LockEnv = "SEALBENCH_LOCK"

// HostLock asks the host for the host-wide lock its runner takes: LockEnv
// as its sessions have it, or def.
func HostLock(ctx context.Context, c *sshx.Client, def string) (string, error) {
	return hostPath(ctx, c, LockEnv, def)
}

// hostPath is the environment variable env of the host's sessions, or
// def, which must be an absolute, clean path.
func hostPath(ctx context.Context, c *sshx.Client, env, def string) (string, error) {
	out, err := c.Exec(ctx, sshx.Command{Name: strings.ToLower(env), Argv: []string{"sh", "-c", `printf '%s\n' "${` + env + `:-` + def + `}"`}})
	if err != nil {
		return "", err
	}
	p := strings.TrimSpace(string(out))
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "", fmt.Errorf("%s on %s is %q: not an absolute, clean path", env, c, p)
	}
	return p, nil
}

// startScript starts the stand-in in a session of its own (setsid, in the
// background of a shell with no job control, so it is not a process
// group leader and setsid does not fork: $! is the stand-in), with a
// clean environment, and waits for its socket, saying why when it dies
// first. Its arguments: the target's directory, the binary, its state,
// its socket, its log, and how many tenths of a second to wait.
const startScript = `set -u
dir=$1 bin=$2 state=$3 sock=$4 log=$5 tries=$6
cd "$dir"
(umask 077 && mkdir -p "$state")
# The stand-in runs with the umask a local one gets: the image's files it
# unpacks must stay readable to the Sandboxes' users.
umask 022
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C setsid "$bin" serve --socket "$sock" --state "$state" >>"$log" 2>&1 </dev/null &
pid=$!
echo "$pid"
i=0
while [ ! -S "$sock" ]; do
	case $(sed -n 's/^State:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null) in
	''|Z*) echo "the stand-in exited before it made its socket; the end of its log, $log:" >&2; tail -c 2000 "$log" >&2; exit 4 ;;
	esac
	i=$((i+1))
	if [ "$i" -gt "$tries" ]; then echo "the stand-in made no socket $sock in time; the end of its log, $log:" >&2; tail -c 2000 "$log" >&2; exit 5; fi
	sleep 0.1
done
`

func (l *Local) start(ctx context.Context) error {
	tries := strconv.Itoa(int(l.ReadyTimeout / (100 * time.Millisecond)))
	out, err := l.o.SSH.Exec(ctx, sshx.Command{Name: "start-standin", Timeout: l.ReadyTimeout + 30*time.Second,
		Argv: []string{"sh", "-c", startScript, "sh", l.dir, l.bin, l.state, l.socket, l.logp, tries}})
	if err != nil {
		return fmt.Errorf("starting the stand-in on %s: %w", l.o.Host, err)
	}
	l.o.Log("started the stand-in on %s (pid %s there), forwarding %s", l.o.Host, strings.TrimSpace(string(out)), l.socket)
	return nil
}

// waitReady waits for the stand-in to answer through the forward.
func (l *Local) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(l.ReadyTimeout)
	for {
		err := l.ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *Local) ping(ctx context.Context) error {
	if err := engine.Ping(ctx, l.Endpoint(), 5*time.Second); err != nil {
		return fmt.Errorf("the stand-in at %s on %s does not answer (its log there: %s): %w", l.socket, l.o.Host, l.logp, err)
	}
	return nil
}

// Destroy tears down what the run's ledger names of the target (the
// stand-in stopped by its binary and marker, never a pid alone; its
// Sandboxes' inits, its state, socket and files on the host, over SSH),
// then closes the forward: every step runs, and every failure is
// returned. The run's directory on the host goes with the run.
func (l *Local) Destroy(ctx context.Context) error {
	var errs *multierror.Error
	if _, err := runs.Teardown(ctx, l.o.Run.Dir, runs.TeardownOptions{Targets: []string{l.o.Name}, Log: l.o.Log}); err != nil {
		errs = multierror.Append(errs, err)
	}
	l.closeForward()
	return errs.ErrorOrNil()
}

// Inventory lists the ledger's entries of the target that still exist,
// here and on the host.
func (l *Local) Inventory(ctx context.Context) ([]runs.Resource, error) {
	return l.o.Run.Held(ctx, l.o.Name)
}
