package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
)

// sandbox runs commands in one container through the Engine API.
type sandbox struct {
	ex      *engine.Execer
	id      string
	engine  string        // manifests.EngineDockerd, EngineStandin or EngineKubernetes
	timeout time.Duration // of each exec: cells.TimeoutOn the target
	// restarts counts the execs the Engine could not start and this
	// sandbox started again (see exec).
	restarts int
	// beforeRestart, when set (by tests), runs before each restart.
	beforeRestart func()
}

// maxRestarts is how many more times an exec the Engine failed to start
// is tried before its step fails.
const maxRestarts = 2

// newSandbox records, creates and starts the Sandbox of one sample on c,
// and returns it with the function that removes it.
func newSandbox(ctx context.Context, c *engineConn, o EngineOptions, name string) (*sandbox, func() error, error) {
	id, err := engine.CreateSandbox(ctx, c.cli, o.Ledger, engine.Sandbox{RunID: o.RunID, Target: c.Name, Endpoint: c.Endpoint,
		Engine: c.Engine, Runtime: c.Runtime, GVisor: c.FUSE == manifests.FUSEGVisor, Image: o.Image.ID, Name: name, Cmd: []string{"sleep", "infinity"}})
	if err != nil {
		return nil, nil, err
	}
	remove := func() error {
		return c.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	}
	if err := c.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		remove()
		return nil, nil, fmt.Errorf("starting the Sandbox: %w", err)
	}
	return &sandbox{ex: c.ex, id: id, engine: c.Engine, timeout: cells.TimeoutOn(c.Emulated)}, remove, nil
}

type execResult struct {
	stdout, stderr []byte
	code           int
	wall           time.Duration
}

// exec runs sh -c script in the Sandbox: with the container's grant
// (layerfsd's steps) or as BodyUser; its wall time covers create, start with
// the stream read to EOF, and inspect, as the runner sees them. A root exec
// keeps the container's capabilities on dockerd, but none on the stand-in
// unless it is privileged; a privileged exec on dockerd asks for every
// capability, which a container without them cannot be given.
//
// An exec the Engine could not start (runc's exec fails now and then under
// load: "read init-p: connection reset by peer") never ran: dockerd answers
// exit 126 with no pid and its error on stdout. It is started again, at
// most maxRestarts times with a short pause, and counted in restarts. stdin,
// when not nil, opens what the process reads: each try reads it afresh.
func (s *sandbox) exec(ctx context.Context, privileged bool, dir, script string, stdin func() io.Reader) (execResult, error) {
	for try := 0; ; try++ {
		r, started, err := s.execOnce(ctx, privileged, dir, script, stdin)
		if err != nil || started || try == maxRestarts {
			return r, err
		}
		s.restarts++
		if s.beforeRestart != nil {
			s.beforeRestart()
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
		}
	}
}

// execOnce is one try of exec; started is false when the Engine says the
// process never ran.
func (s *sandbox) execOnce(ctx context.Context, privileged bool, dir, script string, stdin func() io.Reader) (r execResult, started bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	opts := container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", script}, AttachStdout: true, AttachStderr: true,
		WorkingDir: dir, Privileged: privileged && s.engine == manifests.EngineStandin,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LC_ALL=C", "TZ=UTC"},
	}
	if !privileged {
		opts.User = BodyUser
	}
	var in io.Reader
	if stdin != nil {
		in = stdin()
	}
	var stdout, stderr bytes.Buffer
	t0 := time.Now()
	res, err := s.ex.Exec(ctx, s.id, opts, in, &stdout, &stderr)
	if err != nil {
		return execResult{}, true, err
	}
	r = execResult{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: res.ExitCode, wall: time.Since(t0)}
	return r, !(res.ExitCode == 126 && res.Pid == 0 && !res.Running), nil
}

// must runs a step that has to succeed, and says which one failed and how.
func (s *sandbox) must(ctx context.Context, step string, privileged bool, dir, script string, stdin func() io.Reader) (execResult, error) {
	r, err := s.exec(ctx, privileged, dir, script, stdin)
	if err != nil {
		return r, fmt.Errorf("%s: %w", step, err)
	}
	if r.code != 0 {
		return r, fmt.Errorf("%s: exit %d: %s", step, r.code, clip(strings.TrimSpace(string(why(r))), 300))
	}
	return r, nil
}

// why is what a failed exec said: its stderr, or its stdout when stderr is
// empty (where dockerd writes why it could not start an exec).
func why(r execResult) []byte {
	if len(bytes.TrimSpace(r.stderr)) == 0 {
		return r.stdout
	}
	return r.stderr
}

// sandboxShell runs a verifier's scripts in a workspace of the Sandbox.
type sandboxShell struct {
	sb  *sandbox
	dir string
}

func (sh sandboxShell) Sh(ctx context.Context, script string, stdin []byte) ([]byte, error) {
	r, err := sh.sb.exec(ctx, false, sh.dir, script, func() io.Reader { return bytes.NewReader(stdin) })
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return r.stdout, &cells.ScriptError{ExitCode: r.code, Stderr: string(r.stderr)}
	}
	return r.stdout, nil
}
