package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/cli/cli/config"
	dcontext "github.com/docker/cli/cli/context"
	"github.com/docker/cli/cli/context/store"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/engine"
)

// The docker CLI's names for what picks its dockerd: the environment
// variables, the context that stands for them, and the endpoint a
// context's metadata names (docker/cli's cli/command and
// cli/context/docker, which this package does not link: they bring
// another Engine client with them).
const (
	EnvDockerHost    = client.EnvOverrideHost // DOCKER_HOST
	EnvDockerContext = "DOCKER_CONTEXT"
	// DefaultContext is the context the docker CLI makes up from
	// DOCKER_HOST (or the default socket) when none is chosen.
	DefaultContext = "default"
	dockerEndpoint = "docker"
)

// Endpoint is the dockerd the docker CLI would talk to, and what chose it.
type Endpoint struct {
	Host string // unix:///path, tcp://host:port, ...
	// Context is the docker context it came from; DefaultContext when it
	// is DOCKER_HOST's or the default socket.
	Context string
	// From says what chose it, for messages: "DOCKER_HOST", "the
	// default socket", "DOCKER_CONTEXT", "currentContext in
	// ~/.docker/config.json", "docker@CONTEXT".
	From string
}

func (e Endpoint) String() string {
	if e.Context == DefaultContext {
		return e.Host + " (" + e.From + ")"
	}
	return fmt.Sprintf("%s (context %s, from %s)", e.Host, e.Context, e.From)
}

// ResolveEndpoint finds the dockerd as the docker CLI does: the context
// named (docker@CONTEXT, as `docker --context CONTEXT`) when not empty;
// otherwise DOCKER_HOST, then DOCKER_CONTEXT, then the currentContext of
// config.json in the docker CLI's configuration directory (DOCKER_CONFIG,
// or ~/.docker), then the default socket. A context is read from that
// directory's context store (contexts/meta/<sha256 of its name>/meta.json,
// with docker/cli's store package). The context "default" is DOCKER_HOST
// or the default socket. Refused, each with what to do instead: a context
// that is not there, one whose endpoint is ssh:// (docker@ssh://USER@HOST
// is sealbench's way there) and one that needs TLS material (the Engine
// client takes TLS from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH only).
func ResolveEndpoint(named string) (Endpoint, error) {
	dir := configDir()
	name, from := named, "docker@CONTEXT"
	if name == "" {
		switch {
		case os.Getenv(EnvDockerHost) != "":
			return Endpoint{Host: os.Getenv(EnvDockerHost), Context: DefaultContext, From: EnvDockerHost}, nil
		case os.Getenv(EnvDockerContext) != "":
			name, from = os.Getenv(EnvDockerContext), EnvDockerContext
		default:
			cf, err := config.Load(dir)
			if err != nil {
				return Endpoint{}, fmt.Errorf("reading the docker CLI's configuration in %s: %w", dir, err)
			}
			name, from = cf.CurrentContext, "currentContext in "+filepath.Join(dir, config.ConfigFileName)
		}
	}
	if name == "" || name == DefaultContext {
		if h := os.Getenv(EnvDockerHost); h != "" {
			return Endpoint{Host: h, Context: DefaultContext, From: EnvDockerHost}, nil
		}
		return Endpoint{Host: client.DefaultDockerHost, Context: DefaultContext, From: "the default socket"}, nil
	}
	return contextEndpoint(dir, name, from)
}

// configDir is the docker CLI's configuration directory, as its
// config.Dir says it (which reads DOCKER_CONFIG once per process; this
// reads it every time).
func configDir() string {
	if d := os.Getenv(config.EnvOverrideConfigDir); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".docker"
	}
	return filepath.Join(home, ".docker")
}

// contextEndpoint reads the docker endpoint of the context name from the
// context store in dir.
func contextEndpoint(dir, name, from string) (Endpoint, error) {
	storeDir := filepath.Join(dir, "contexts")
	if err := store.ValidateContextName(name); err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s): %w", name, from, err)
	}
	s := store.New(storeDir, store.NewConfig(
		func() any { return &map[string]any{} },
		store.EndpointTypeGetter(dockerEndpoint, func() any { return &dcontext.EndpointMetaBase{} })))
	meta, err := s.GetMetadata(name)
	if errdefs.IsNotFound(err) {
		have, _ := store.Names(s)
		return Endpoint{}, fmt.Errorf("docker context %q (from %s) is not in %s (it has: %s); `docker context ls` lists them",
			name, from, storeDir, strings.Join(append([]string{DefaultContext}, have...), ", "))
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("reading docker context %q (from %s) in %s: %w", name, from, storeDir, err)
	}
	ep, ok := meta.Endpoints[dockerEndpoint].(dcontext.EndpointMetaBase)
	if !ok || ep.Host == "" {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s) names no docker endpoint", name, from)
	}
	out := Endpoint{Host: ep.Host, Context: name, From: from}
	if strings.HasPrefix(ep.Host, "ssh://") {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s) reaches its dockerd over SSH (%s): give sealbench that host as a target, docker@%s, which reaches it over its own SSH connection",
			name, from, ep.Host, ep.Host)
	}
	files, err := s.ListTLSFiles(name)
	if err != nil {
		return Endpoint{}, fmt.Errorf("reading docker context %q's TLS material: %w", name, err)
	}
	if len(files[dockerEndpoint]) > 0 || ep.SkipTLSVerify {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s) reaches %s with TLS, and sealbench's Engine client takes TLS only from the environment: set %s=%s, DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH to a directory holding ca.pem, cert.pem and key.pem",
			name, from, ep.Host, EnvDockerHost, ep.Host)
	}
	if err := engine.CheckEndpoint(ep.Host); err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q (from %s): %w", name, from, err)
	}
	return out, nil
}
