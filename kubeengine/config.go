package kubeengine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PlatformName is what /version says in Platform.Name.
const PlatformName = "sealbench kube-engine"

// Config says what a kube-engine serves and which node of which cluster
// it puts pods on.
type Config struct {
	Socket       string // the unix socket served (0600; its directory exists)
	Kubeconfig   string // "": client-go's default loading rules (KUBECONFIG, ~/.kube/config)
	Context      string // "": the kubeconfig's current context
	Namespace    string // where the pods go; it must exist
	Node         string // the node every pod is bound to (spec.nodeName: no scheduler needed)
	RuntimeClass string // pod spec runtimeClassName; "": the cluster's default
	FUSEResource string // the extended resource that gives a container /dev/fuse (sealbench.dev/fuse)
	Containerd   string // the node's containerd socket, reachable from this host: image load and
	// inspect go there; "": both answer an error that says so
	Ctr   string // ctr's path; "": looked up on PATH
	RunID string // every pod is labelled sealbench.run=RunID (manifests.RunLabel)
	// Target is the name of the run's target this kube-engine serves: its
	// pods are labelled with it too (LabelTarget); "": no such label.
	Target string
	// SeccompDir is the node kubelet's seccomp directory (its root
	// directory's seccomp/), reachable from this host: a create's
	// seccomp=PROFILE (dockerd's option; the JSON engine.SandboxConfig
	// gives) is written there and named by the pod as a Localhost
	// profile. "": such a create is refused, and pods get RuntimeDefault.
	SeccompDir string
	// AgentSandbox makes each container an agent-sandbox Sandbox
	// (agents.x-k8s.io/v1beta1) whose pod template is the pod it would
	// otherwise create: agent-sandbox's controller makes the pod, start
	// waits for the Sandbox to be Ready, remove deletes the Sandbox and
	// its pod.
	AgentSandbox bool
	// WarmPool, with AgentSandbox, claims each container (a SandboxClaim)
	// from a SandboxWarmPool of WarmPool Sandboxes that the kube-engine
	// makes at the first start (warmpool.go); 0: each a cold Sandbox.
	WarmPool int
	// StartTimeout bounds how long a container's start waits for its pod
	// to run; 0: StartLimit.
	StartTimeout time.Duration
}

// fields are c's fields by the flag that sets each.
func (c *Config) fields() []struct {
	name string
	v    *string
} {
	return []struct {
		name string
		v    *string
	}{{"socket", &c.Socket}, {"kubeconfig", &c.Kubeconfig}, {"context", &c.Context}, {"namespace", &c.Namespace},
		{"node", &c.Node}, {"runtime-class", &c.RuntimeClass}, {"fuse-resource", &c.FUSEResource},
		{"containerd", &c.Containerd}, {"ctr", &c.Ctr}, {"run", &c.RunID}, {"seccomp-dir", &c.SeccompDir}, {"target", &c.Target}}
}

// Args renders c as the flags ParseArgs reads.
func (c Config) Args() []string {
	var args []string
	for _, f := range c.fields() {
		if *f.v != "" {
			args = append(args, "--"+f.name, *f.v)
		}
	}
	if c.AgentSandbox {
		args = append(args, "--agent-sandbox")
	}
	if c.WarmPool != 0 {
		args = append(args, "--warm-pool", strconv.Itoa(c.WarmPool))
	}
	if c.StartTimeout != 0 {
		args = append(args, "--start-timeout", c.StartTimeout.String())
	}
	return args
}

// ParseArgs reads the flags Args writes and checks c (Validate).
func ParseArgs(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("kube-engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range c.fields() {
		fs.StringVar(f.v, f.name, "", "")
	}
	fs.DurationVar(&c.StartTimeout, "start-timeout", 0, "")
	fs.BoolVar(&c.AgentSandbox, "agent-sandbox", false, "")
	fs.IntVar(&c.WarmPool, "warm-pool", 0, "")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("kube-engine: %w", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("kube-engine: unexpected argument %q", fs.Arg(0))
	}
	return c, c.Validate()
}

// Validate reports every field that is missing or wrong, each by its flag.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"--socket", c.Socket}, {"--namespace", c.Namespace},
		{"--node", c.Node}, {"--fuse-resource", c.FUSEResource}, {"--run", c.RunID}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("kube-engine: %s is required", f.name))
		}
	}
	for _, f := range []struct{ name, v string }{{"--socket", c.Socket}, {"--containerd", c.Containerd}, {"--seccomp-dir", c.SeccompDir}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			errs = append(errs, fmt.Errorf("kube-engine: %s %q must be an absolute path", f.name, f.v))
		}
	}
	if c.WarmPool < 0 || c.WarmPool > MaxWarmPool {
		errs = append(errs, fmt.Errorf("kube-engine: --warm-pool %d is not from 0 to %d", c.WarmPool, MaxWarmPool))
	}
	if c.WarmPool > 0 && !c.AgentSandbox {
		errs = append(errs, errors.New("kube-engine: --warm-pool goes with --agent-sandbox (a warm pool is agent-sandbox's)"))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("kube-engine: --start-timeout %s is negative", c.StartTimeout))
	}
	return errors.Join(errs...)
}

// MaxWarmPool is the largest warm pool a kube-engine keeps: each of its
// Sandboxes holds a pod, and the node's FUSE devices, all the run long.
const MaxWarmPool = 8

// PodName is the pod a container name maps to: the name lowercased, each
// character a pod name cannot hold made '-', and, when that changed the
// name or it is longer than a DNS label (63, the pod's hostname), a hash
// of the original appended so that two names never meet.
func PodName(container string) string {
	container = strings.TrimPrefix(container, "/")
	b := []byte(strings.ToLower(container))
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-")
	if s == container && len(s) <= 63 && s != "" {
		return s
	}
	sum := sha256.Sum256([]byte(container))
	h := hex.EncodeToString(sum[:4])
	if len(s) > 54 {
		s = strings.TrimRight(s[:54], "-")
	}
	if s == "" {
		return "c-" + h
	}
	return s + "-" + h
}
