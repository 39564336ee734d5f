package kubeengine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/internal/sockpath"
	"github.com/sealbench/sealbench/internal/version"
)

// Server answers the Engine API with pods on one node.
type Server struct {
	c      Config
	rest   *rest.Config
	client kubernetes.Interface
	// dynamic reaches agent-sandbox's kinds (Config.AgentSandbox).
	dynamic dynamic.Interface
	ctr     string // ctr's path; "" when Containerd is not set

	mu         sync.Mutex
	containers map[string]*containerRec // by id: created here, or found in the cluster
	execs      map[string]*execRec
	lease      nodeHold // the run's hold on the node's Lease
	// pulled are the images pulled through this kube-engine, by id:
	// a container of one runs as a pod naming its pinned reference.
	pulled map[string]*Resolved

	// poolMu guards poolDigest: the digest of the pod spec the run's
	// SandboxTemplate was made from (Config.WarmPool); "" until made.
	poolMu     sync.Mutex
	poolDigest string

	api *engineapi.Router // the Engine API, routed to the methods the Backend interfaces name
}

var (
	_ http.Handler          = (*Server)(nil)
	_ engineapi.Backend     = (*Server)(nil)
	_ engineapi.ImagePuller = (*Server)(nil)
)

// New checks c and builds the clients; it creates nothing.
func New(c Config) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rc, err := RESTConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kube-engine: loading the kubeconfig: %w", err)
	}
	cl, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube-engine: a client for %s: %w", rc.Host, err)
	}
	s := newServer(c, rc, cl)
	if s.dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("kube-engine: a dynamic client for %s: %w", rc.Host, err)
	}
	if c.Containerd != "" {
		s.ctr = c.Ctr
		if s.ctr == "" {
			if s.ctr, err = exec.LookPath("ctr"); err != nil {
				return nil, fmt.Errorf("kube-engine: images are loaded with ctr, which is not on PATH: %w", err)
			}
		}
	}
	return s, nil
}

// newServer is a Server of c that reaches the cluster through cl.
func newServer(c Config, rc *rest.Config, cl kubernetes.Interface) *Server {
	s := &Server{c: c, rest: rc, client: cl, containers: map[string]*containerRec{}, execs: map[string]*execRec{}, pulled: map[string]*Resolved{}}
	s.api = engineapi.NewRouter(s, engineapi.Identity{
		Name:   "sealbench kube-engine",
		Server: "sealbench-kube-engine/" + version.Version + " (linux)",
		OS:     "linux",
	})
	return s
}

// RESTConfig is the client configuration of the cluster c names: its
// Kubeconfig (one file, or a KUBECONFIG list of them joined by ':') and
// Context, or client-go's defaults (KUBECONFIG, then ~/.kube/config) and
// the current context.
func RESTConfig(c Config) (*rest.Config, error) {
	return ClientConfig(c).ClientConfig()
}

// ClientConfig is the kubeconfig c names, as kubectl reads it: c's
// Kubeconfig (a path, or a list of them joined by ':'), else KUBECONFIG,
// else ~/.kube/config; c's Context, else the current context. Its
// Namespace is the context's namespace, "default" where it sets none.
func ClientConfig(c Config) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules.ExplicitPath = c.Kubeconfig
		if strings.ContainsRune(c.Kubeconfig, ':') {
			rules.ExplicitPath, rules.Precedence = "", strings.Split(c.Kubeconfig, ":")
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
}

// Serve serves c's socket (0600) until ctx is done, then removes it.
func Serve(ctx context.Context, c Config) error {
	s, err := New(c)
	if err != nil {
		return err
	}
	ln, err := sockpath.ListenPrivate("kube-engine", c.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(c.Socket)
	defer s.releaseNode()
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kube-engine: serving %s: %w", c.Socket, err)
	}
	return nil
}

// The Engine API's errors, which the handlers wrap to choose the status
// of their answer (engineapi.Fail).
var (
	errNotFound       = engineapi.ErrNotFound
	errConflict       = engineapi.ErrConflict
	errBadInput       = engineapi.ErrBadInput
	errNotImplemented = engineapi.ErrNotImplemented
)

// ServeHTTP answers an Engine API request (engineapi.Router).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.api.ServeHTTP(w, r)
}

// node is the node the pods go to.
func (s *Server) node(ctx context.Context) (*corev1.Node, error) {
	n, err := s.client.CoreV1().Nodes().Get(ctx, s.c.Node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting node %s: %w", s.c.Node, err)
	}
	return n, nil
}

// machine is uname -m for a node's GOARCH-style architecture.
func machine(arch string) string {
	switch arch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	}
	return arch
}

// SystemVersion is kube-engine's version, with the node's kernel and
// runtime and the cluster's version.
func (s *Server) SystemVersion(ctx context.Context) (any, error) {
	n, err := s.node(ctx)
	if err != nil {
		return nil, err
	}
	sv, err := s.client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("asking the API server its version: %w", err)
	}
	ni := n.Status.NodeInfo
	v := types.Version{
		Version: version.Version, APIVersion: engineapi.APIVersion, MinAPIVersion: engineapi.MinAPIVersion,
		GitCommit: version.Version, GoVersion: runtime.Version(), Os: ni.OperatingSystem, Arch: ni.Architecture,
		KernelVersion: ni.KernelVersion,
	}
	v.Platform.Name = PlatformName
	v.Components = []types.ComponentVersion{
		{Name: "Engine", Version: version.Version, Details: map[string]string{"ApiVersion": engineapi.APIVersion, "MinAPIVersion": engineapi.MinAPIVersion,
			"Os": ni.OperatingSystem, "Arch": ni.Architecture, "KernelVersion": ni.KernelVersion}},
		{Name: "Kubernetes", Version: sv.GitVersion, Details: map[string]string{"Kubelet": ni.KubeletVersion, "Node": n.Name}},
		{Name: "ContainerRuntime", Version: ni.ContainerRuntimeVersion},
	}
	return v, nil
}

// SystemInfo is the node's, with its RuntimeClass or its runtime.
func (s *Server) SystemInfo(ctx context.Context) (any, error) {
	n, err := s.node(ctx)
	if err != nil {
		return nil, err
	}
	ni := n.Status.NodeInfo
	info := system.Info{
		ID: string(n.UID), Name: n.Name, KernelVersion: ni.KernelVersion, OperatingSystem: ni.OSImage, OSType: ni.OperatingSystem,
		Architecture: machine(ni.Architecture), NCPU: int(n.Status.Capacity.Cpu().Value()), MemTotal: n.Status.Capacity.Memory().Value(),
		ServerVersion: version.Version, Driver: "kubernetes", LoggingDriver: "kubernetes", CgroupDriver: "none",
		SecurityOptions: []string{"name=seccomp,profile=RuntimeDefault", "name=no-new-privileges"},
		Labels:          []string{"org.sealbench.kube-engine=true", "org.sealbench.kube-engine.node=" + n.Name, "org.sealbench.kube-engine.runtime=" + ni.ContainerRuntimeVersion},
	}
	if s.c.RuntimeClass != "" {
		rc, err := s.client.NodeV1().RuntimeClasses().Get(ctx, s.c.RuntimeClass, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting RuntimeClass %s: %w", s.c.RuntimeClass, err)
		}
		info.Runtimes = map[string]system.RuntimeWithStatus{rc.Name: {Runtime: system.Runtime{Path: rc.Handler}}}
		info.DefaultRuntime = rc.Name
	} else {
		info.Runtimes = map[string]system.RuntimeWithStatus{"default": {Runtime: system.Runtime{Path: ni.ContainerRuntimeVersion}}}
		info.DefaultRuntime = "default"
	}
	info.Swarm.LocalNodeState = swarm.LocalNodeStateInactive
	return info, nil
}
