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
	ctr    string // ctr's path; "" when Containerd is not set

	mu         sync.Mutex
	containers map[string]*containerRec // by id: created here, or found in the cluster
	execs      map[string]*execRec
	lease      nodeHold // the run's hold on the node's Lease
	// pulled are the images pulled through this kube-engine, by id:
	// a container of one runs as a pod naming its pinned reference.
	pulled map[string]*Resolved
}

var _ http.Handler = (*Server)(nil)

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
	s := &Server{c: c, rest: rc, client: cl, containers: map[string]*containerRec{}, execs: map[string]*execRec{}, pulled: map[string]*Resolved{}}
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

// RESTConfig is the client configuration of the cluster c names: its
// Kubeconfig (one file, or a KUBECONFIG list of them joined by ':') and
// Context, or client-go's defaults (KUBECONFIG, then ~/.kube/config) and
// the current context.
func RESTConfig(c Config) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules.ExplicitPath = c.Kubeconfig
		if strings.ContainsRune(c.Kubeconfig, ':') {
			rules.ExplicitPath, rules.Precedence = "", strings.Split(c.Kubeconfig, ":")
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
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

// Errors the handlers return, mapped to status codes by fail.
var (
	errNotFound       = errors.New("not found")
	errConflict       = errors.New("conflict")
	errBadInput       = errors.New("bad input")
	errNotImplemented = errors.New("not implemented")
)

// ServeHTTP routes an Engine API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := engineapi.Unversioned(r.URL.Path)
	if err != nil {
		engineapi.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Api-Version", engineapi.APIVersion)
	w.Header().Set("Server", "sealbench-kube-engine/"+version.Version+" (linux)")
	w.Header().Set("Ostype", "linux")
	w.Header().Set("Docker-Experimental", "false")
	s.route(w, r, p)
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, p string) {
	m := r.Method
	ctx := r.Context()
	seg := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case p == "/_ping" && (m == http.MethodGet || m == http.MethodHead):
		w.Header().Set("Cache-Control", "no-cache, no-store, must-revalidate")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if m == http.MethodGet {
			w.Write([]byte("OK"))
		}
		return
	case p == "/version" && m == http.MethodGet:
		s.answer(w, http.StatusOK)(s.version(ctx))
		return
	case p == "/info" && m == http.MethodGet:
		s.answer(w, http.StatusOK)(s.info(ctx))
		return
	case p == "/images/create" && m == http.MethodPost:
		s.imagePull(w, r)
		return
	case p == "/images/load" && m == http.MethodPost:
		s.imageLoad(w, r)
		return
	case seg[0] == "images" && len(seg) >= 3 && seg[len(seg)-1] == "json" && m == http.MethodGet:
		s.answer(w, http.StatusOK)(s.imageInspect(ctx, strings.Join(seg[1:len(seg)-1], "/")))
		return
	case seg[0] == "images" && len(seg) >= 2 && m == http.MethodDelete:
		s.answer(w, http.StatusOK)(s.imageRemove(ctx, strings.Join(seg[1:], "/")))
		return
	case p == "/containers/create" && m == http.MethodPost:
		s.answer(w, http.StatusCreated)(s.containerCreate(r))
		return
	case seg[0] == "containers" && len(seg) == 2 && m == http.MethodDelete:
		s.answer(w, http.StatusNoContent)(nil, s.containerRemove(ctx, seg[1], boolParam(r, "force")))
		return
	case seg[0] == "containers" && len(seg) == 3:
		id, op := seg[1], seg[2]
		switch {
		case op == "json" && m == http.MethodGet:
			s.answer(w, http.StatusOK)(s.containerInspect(ctx, id))
			return
		case op == "start" && m == http.MethodPost:
			s.answer(w, http.StatusNoContent)(nil, s.containerStart(ctx, id))
			return
		case op == "wait" && m == http.MethodPost:
			s.containerWait(w, r, id)
			return
		case op == "logs" && m == http.MethodGet:
			s.containerLogs(w, r, id)
			return
		case op == "exec" && m == http.MethodPost:
			s.answer(w, http.StatusCreated)(s.execCreate(r, id))
			return
		}
	case seg[0] == "exec" && len(seg) == 3:
		id, op := seg[1], seg[2]
		switch {
		case op == "start" && m == http.MethodPost:
			s.execStart(w, r, id)
			return
		case op == "json" && m == http.MethodGet:
			s.answer(w, http.StatusOK)(s.execInspect(id))
			return
		}
	}
	engineapi.Unserved(w, r, p, "sealbench kube-engine")
}

func boolParam(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "1" || strings.EqualFold(v, "true")
}

// answer returns a function that writes a handler's result: v as JSON
// with code (nothing for 204), or err in the Engine API's error shape.
func (s *Server) answer(w http.ResponseWriter, code int) func(v any, err error) {
	return func(v any, err error) {
		if err != nil {
			fail(w, err)
			return
		}
		if code == http.StatusNoContent {
			w.WriteHeader(code)
			return
		}
		engineapi.WriteJSON(w, code, v)
	}
}

// fail maps an error to its status code.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	for _, c := range []struct {
		err  error
		code int
	}{{errNotFound, http.StatusNotFound}, {errConflict, http.StatusConflict}, {errBadInput, http.StatusBadRequest},
		{errNotImplemented, http.StatusNotImplemented}} {
		if errors.Is(err, c.err) {
			code = c.code
		}
	}
	msg := err.Error()
	for _, e := range []error{errNotFound, errConflict, errBadInput, errNotImplemented} {
		msg = strings.ReplaceAll(msg, e.Error()+": ", "")
	}
	engineapi.WriteError(w, code, msg)
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

func (s *Server) version(ctx context.Context) (any, error) {
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

func (s *Server) info(ctx context.Context) (any, error) {
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
