// Package local provisions the local target: the Engine API stand-in
// (`standin serve`) running on this host as a background process of the
// run, from a verified bundle's binary, with its socket in a private
// directory of the run and the Sandbox image loaded into it through the
// Engine API.
//
// A run's local target lives in <run>/local:
//
//	bin/standin         the bundle's binary, copied and checked against the manifest
//	sock/standin.sock   the Engine endpoint (the directory is 0700)
//	state/              the stand-in's state: images, layers, Sandboxes
//	standin.log         its output
package local

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runs"
)

// Name is the target's name.
const Name = "local"

var _ provision.Target = (*Local)(nil)

// Options configures the local target.
type Options struct {
	Run *runs.Run
	// Bundle is a verified bundle directory; Standin is the manifest's
	// digest of its bin/linux-<arch>/standin. The copy that runs is checked
	// against it, so the bytes run are the bytes verified.
	Bundle  string
	Standin manifests.Digest
	// ReadyTimeout bounds the wait for the stand-in to answer (default 30s).
	ReadyTimeout time.Duration
	Log          func(format string, args ...any)
}

// Local is the stand-in on this host.
type Local struct {
	o                           Options
	dir, bin, sock, state, logp string
}

// StandinPath is where a bundle keeps the stand-in for this machine.
func StandinPath(bundleDir string) string {
	return filepath.Join(bundleDir, "bin", "linux-"+runtime.GOARCH, "standin")
}

// StandinBundlePath is the manifest path of the stand-in for this machine.
func StandinBundlePath() string { return "bin/linux-" + runtime.GOARCH + "/standin" }

// New returns the local target of o.Run. It creates nothing.
func New(o Options) (*Local, error) {
	if o.Run == nil {
		return nil, errors.New("local target: no run")
	}
	if err := o.Standin.Validate(); err != nil {
		return nil, fmt.Errorf("local target: the stand-in's digest from the verified manifest: %w", err)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	dir := filepath.Join(o.Run.Dir, Name)
	l := &Local{o: o, dir: dir, bin: filepath.Join(dir, "bin", "standin"), sock: filepath.Join(dir, "sock", "standin.sock"),
		state: filepath.Join(dir, "state"), logp: filepath.Join(dir, "standin.log")}
	if len(l.sock) > 107 {
		return nil, fmt.Errorf("the stand-in's socket path %s is %d bytes, over the 107 a unix socket allows: set %s to a shorter directory", l.sock, len(l.sock), runs.StateDirEnv)
	}
	return l, nil
}

func (l *Local) Name() string     { return Name }
func (l *Local) Endpoint() string { return "unix://" + l.sock }

func (l *Local) record(kind manifests.ResourceKind, key, detail string) error {
	return l.o.Run.Ledger.Record(manifests.LedgerEntry{Target: Name, Kind: kind, Key: key, Detail: detail})
}

// marker is the argv element that makes our stand-in ours: its state
// directory, which lies in this run's directory and so is unique.
func (l *Local) match() func([]string) bool { return runs.MarkedBy(l.bin, l.state) }

// running reports whether our stand-in is running and answers.
func (l *Local) running(ctx context.Context) bool {
	return len(runs.FindProcs(l.match())) > 0 && engine.Ping(ctx, l.Endpoint(), 5*time.Second) == nil
}

// Create starts the stand-in; when it is already running, it does nothing.
func (l *Local) Create(ctx context.Context) (err error) {
	if l.running(ctx) {
		return nil
	}
	if err := l.record(manifests.ResourceDir, l.dir, "the local target's directory"); err != nil {
		return err
	}
	for _, d := range []string{l.dir, filepath.Dir(l.bin), filepath.Dir(l.sock)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("making %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	if err := l.copyStandin(); err != nil {
		return err
	}
	if err := l.record(manifests.ResourceStateDir, l.state, "the stand-in's state"); err != nil {
		return err
	}
	if err := os.MkdirAll(l.state, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", l.state, err)
	}
	if err := l.record(manifests.ResourceSocket, l.sock, "the stand-in's Engine API socket"); err != nil {
		return err
	}
	if err := l.o.Run.Ledger.Record(manifests.LedgerEntry{Target: Name, Kind: manifests.ResourceProcess, Key: l.state, Exe: l.bin, Detail: "standin serve"}); err != nil {
		return err
	}
	logf, err := os.OpenFile(l.logp, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the stand-in's log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(l.bin, "serve", "--socket", l.sock, "--state", l.state)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = l.dir
	// A clean environment: the stand-in needs none of ours (and so never
	// holds SEALBENCH_PASSWORD or anything else it was not meant to see).
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	// Its own session: it outlives this process (provision leaves it up)
	// and a Ctrl-C at our terminal does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the stand-in %s: %w", l.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	l.o.Log("started the stand-in (pid %d), waiting for %s", cmd.Process.Pid, l.Endpoint())
	if err := l.waitReady(ctx, exited); err != nil {
		return err
	}
	return nil
}

func (l *Local) waitReady(ctx context.Context, exited <-chan error) error {
	cli, err := engine.NewClient(l.Endpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(l.o.ReadyTimeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("the stand-in exited before it answered (%v); its log, %s:\n%s", werr, l.logp, tail(l.logp))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stand-in did not answer on %s within %s: %v; its log, %s:\n%s", l.Endpoint(), l.o.ReadyTimeout, err, l.logp, tail(l.logp))
		}
	}
}

func tail(p string) string {
	b, _ := os.ReadFile(p)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// copyStandin copies the bundle's stand-in into the run's private bin
// directory, hashing as it copies, and refuses the copy unless it has the
// digest the verified manifest gives.
func (l *Local) copyStandin() error {
	src := StandinPath(l.o.Bundle)
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening the bundle's stand-in: %w", err)
	}
	defer in.Close()
	tmp := l.bin + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o700)
	if err != nil {
		return fmt.Errorf("copying the stand-in: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copying the stand-in from %s: %w", src, err)
	}
	if got := manifests.DigestFromHash(h); got != l.o.Standin {
		os.Remove(tmp)
		return fmt.Errorf("the bundle's stand-in %s has digest %s, not the verified %s: the bundle changed after it was verified; verify it again", src, got, l.o.Standin)
	}
	if err := os.Rename(tmp, l.bin); err != nil {
		return fmt.Errorf("moving the stand-in into place: %w", err)
	}
	return nil
}

func (l *Local) client() (*client.Client, error) { return engine.NewClient(l.Endpoint()) }

// InstallImage loads img into the stand-in.
func (l *Local) InstallImage(ctx context.Context, img engine.Image) error {
	cli, err := l.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	return engine.LoadImage(ctx, cli, l.o.Run.Ledger, Name, l.Endpoint(), img)
}

// Identity asks the stand-in.
func (l *Local) Identity(ctx context.Context) (*engine.Identity, error) {
	return engine.Identify(ctx, Name, l.Endpoint())
}

// Destroy tears down every ledger entry of the local target.
func (l *Local) Destroy(ctx context.Context) error {
	_, err := runs.Teardown(ctx, l.o.Run.Dir, runs.TeardownOptions{Targets: []string{Name}, Log: l.o.Log})
	return err
}

// Inventory lists what of the run the local target holds.
func (l *Local) Inventory(ctx context.Context) ([]runs.Resource, error) {
	return l.o.Run.Held(ctx, Name)
}
