package docker_test

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/docker"
	"github.com/sealbench/sealbench/runs"
)

// dockerConfig is a docker CLI configuration directory of the test's own
// (DOCKER_CONFIG), its contexts made by the docker CLI itself, so that
// what is read is the CLI's own on-disk format.
type dockerConfig struct {
	t   *testing.T
	cli string
	dir string
}

func newDockerConfig(t *testing.T) *dockerConfig {
	t.Helper()
	cli := testenv.NeedCommand(t, "docker")
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv(docker.EnvDockerHost, "")
	t.Setenv(docker.EnvDockerContext, "")
	return &dockerConfig{t: t, cli: cli, dir: dir}
}

// docker runs the docker CLI with the test's environment (its
// DOCKER_CONFIG, DOCKER_HOST and DOCKER_CONTEXT) and returns its stdout.
func (c *dockerConfig) docker(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.cli, args...)
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		c.t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// create makes the context name, its docker endpoint the given one
// (`docker context create NAME --docker host=...`).
func (c *dockerConfig) create(name, docker string) {
	c.t.Helper()
	c.docker("context", "create", name, "--docker", docker)
}

// TestResolveEndpointAsTheDockerCLI: the endpoint is the one the docker
// CLI picks, in its order (DOCKER_HOST, DOCKER_CONTEXT, the current
// context of config.json, the default socket; a named context before
// all of them), and the context is the one `docker context show` names;
// an unknown context, an ssh:// one and a TLS one are refused, each
// saying what to do.
func TestResolveEndpointAsTheDockerCLI(t *testing.T) {
	c := newDockerConfig(t)
	c.create("ctx-a", "host=unix:///run/a/docker.sock")
	c.create("ctx-b", "host=tcp://127.0.0.1:2375")
	c.create("far", "host=ssh://bench@gpu1")
	c.create("tls", "host=tcp://127.0.0.1:2376,skip-tls-verify=true")

	check := func(what, named, wantHost, wantContext string) {
		t.Helper()
		ep, err := docker.ResolveEndpoint(named)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ep.Host != wantHost || ep.Context != wantContext {
			t.Errorf("%s: %s, context %q; want %s, context %q", what, ep.Host, ep.Context, wantHost, wantContext)
		}
		if named == "" {
			// The docker CLI's own choice, with the same environment.
			if shown := c.docker("context", "show"); shown != ep.Context {
				t.Errorf("%s: context %q, and `docker context show` says %q", what, ep.Context, shown)
			}
		}
	}
	check("nothing set", "", client.DefaultDockerHost, docker.DefaultContext)
	c.docker("context", "use", "ctx-b")
	check("currentContext ctx-b", "", "tcp://127.0.0.1:2375", "ctx-b")
	t.Setenv(docker.EnvDockerContext, "ctx-a")
	check("DOCKER_CONTEXT=ctx-a over currentContext", "", "unix:///run/a/docker.sock", "ctx-a")
	check("docker@ctx-b over DOCKER_CONTEXT", "ctx-b", "tcp://127.0.0.1:2375", "ctx-b")
	t.Setenv(docker.EnvDockerHost, "unix:///run/h/docker.sock")
	check("DOCKER_HOST over DOCKER_CONTEXT", "", "unix:///run/h/docker.sock", docker.DefaultContext)
	check("docker@ctx-a over DOCKER_HOST", "ctx-a", "unix:///run/a/docker.sock", "ctx-a")
	check("docker@default is DOCKER_HOST", "default", "unix:///run/h/docker.sock", docker.DefaultContext)
	t.Setenv(docker.EnvDockerHost, "")

	for _, tc := range []struct{ named, env, want string }{
		{"nope", "", `docker context "nope" (from docker@CONTEXT) is not in ` + filepath.Join(c.dir, "contexts") + " (it has: default, ctx-a, ctx-b, far, tls)"},
		{"", "nope", `docker context "nope" (from DOCKER_CONTEXT) is not in`},
		{"far", "", "give sealbench that host as a target, docker@ssh://bench@gpu1"},
		{"tls", "", "takes TLS only from the environment: set DOCKER_HOST=tcp://127.0.0.1:2376, DOCKER_TLS_VERIFY=1"},
	} {
		t.Setenv(docker.EnvDockerContext, tc.env)
		_, err := docker.ResolveEndpoint(tc.named)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("context %q / DOCKER_CONTEXT=%q: %v; want it to say %q", tc.named, tc.env, err, tc.want)
		}
	}
	// The docker target refuses an unknown context before anything is made.
	t.Setenv(docker.EnvDockerContext, "")
	run, err := runs.NewRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := docker.New(docker.Options{Run: run, Context: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("docker@nope: %v; want the unknown context refused", err)
	}
}

// relay is a unix socket in front of a dockerd that counts the
// connections it carries.
type relay struct {
	path  string
	conns atomic.Int64
}

// startRelay listens on dir/name.sock and carries every connection to
// the dockerd at upstream (a unix:// endpoint), until the test ends.
func startRelay(t *testing.T, dir, name, upstream string) *relay {
	t.Helper()
	up, ok := strings.CutPrefix(upstream, "unix://")
	if !ok {
		testenv.Skip(t, "the relay carries connections to a dockerd on a unix socket; DOCKER_HOST is %s", upstream)
	}
	r := &relay{path: filepath.Join(dir, name+".sock")}
	ln, err := net.Listen("unix", r.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				d, err := net.Dial("unix", up)
				if err != nil {
					return
				}
				defer d.Close()
				done := make(chan struct{})
				go func() { io.Copy(d, c); d.(*net.UnixConn).CloseWrite(); close(done) }()
				io.Copy(c, d)
				<-done
			}()
		}
	}()
	return r
}

func (r *relay) endpoint() string { return "unix://" + r.path }

// TestDockerTargetGoesThroughTheContext: with DOCKER_HOST unset, the
// docker target reaches the dockerd through the endpoint of the context
// DOCKER_CONTEXT names, of config.json's current context, and of the one
// docker@CONTEXT names (over DOCKER_CONTEXT): each a relay socket in
// front of the real dockerd, which counts the connections it carries.
// Its pins name the endpoint and the context.
func TestDockerTargetGoesThroughTheContext(t *testing.T) {
	testenv.NeedDocker(t)
	upstream := os.Getenv(docker.EnvDockerHost)
	if upstream == "" {
		upstream = client.DefaultDockerHost
	}
	dir := testenv.ShortTempDir(t, "sbctx-")
	env, current, named := startRelay(t, dir, "env", upstream), startRelay(t, dir, "current", upstream), startRelay(t, dir, "named", upstream)
	c := newDockerConfig(t)
	c.create("via-env", "host="+env.endpoint())
	c.create("via-current", "host="+current.endpoint())
	c.create("via-named", "host="+named.endpoint())
	c.docker("context", "use", "via-current")
	reg, ok := provision.Lookup(docker.Name)
	if !ok {
		t.Fatal("no docker registration")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		what, envContext, node, name, context string
		through                               *relay
	}{
		{"DOCKER_CONTEXT", "via-env", "", "docker", "via-env", env},
		{"currentContext", "", "", "docker", "via-current", current},
		{"docker@via-named", "via-env", "via-named", "docker-via-named", "via-named", named},
	} {
		t.Setenv(docker.EnvDockerContext, tc.envContext)
		run, err := runs.NewRun(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		before := [3]int64{env.conns.Load(), current.conns.Load(), named.conns.Load()}
		tgt, err := reg.New(provision.NewOptions{Run: run, Name: tc.name, Node: tc.node, Log: t.Logf})
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if err := tgt.Create(ctx); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		id, err := tgt.Identity(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		pins := id.Pins()
		if tgt.Endpoint() != tc.through.endpoint() || pins.Endpoint != tc.through.endpoint() || pins.Name != tc.name {
			t.Errorf("%s: endpoint %s, pinned %s as %s; want %s as %s", tc.what, tgt.Endpoint(), pins.Endpoint, pins.Name, tc.through.endpoint(), tc.name)
		}
		if pins.DockerContext != tc.context {
			t.Errorf("%s: pinned context %q; want %s", tc.what, pins.DockerContext, tc.context)
		}
		after := [3]int64{env.conns.Load(), current.conns.Load(), named.conns.Load()}
		for i, r := range []*relay{env, current, named} {
			grew := after[i] > before[i]
			if grew != (r == tc.through) {
				t.Errorf("%s: the relay %s carried %d connections (before: %d)", tc.what, r.path, after[i], before[i])
			}
		}
		if err := tgt.Destroy(ctx); err != nil {
			t.Errorf("%s: destroy: %v", tc.what, err)
		}
		run.Close()
	}
}
