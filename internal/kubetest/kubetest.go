//go:build linux

package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/internal/toolcache"
)

// Images the cluster's containerd holds from the start, imported into its
// k8s.io namespace (pods name them with imagePullPolicy: Never).
const (
	// PauseImage is every pod sandbox's image: busybox sleeping.
	PauseImage = "localhost/sealbench-kube-pause:1"
	// BusyboxImage is busybox with sh as its command (internal/testimage).
	BusyboxImage = "localhost/sealbench-kube-busybox:1"
	// NodeName is the one node's name.
	NodeName = "sealbench-kube-node"
	// GVisorRuntimeClass is the RuntimeClass whose pods run under gVisor:
	// its handler, GVisorHandler, is containerd's runtime of that name,
	// the runsc shim (systrap platform, no network, the OCI seccomp
	// profile applied inside the sandbox, as the gvisor target's runsc).
	GVisorRuntimeClass = "gvisor"
	GVisorHandler      = "runsc"
)

// Tools are the programs a cluster runs, by path.
type Tools struct {
	APIServer, Kubelet                          string // make kube-tools
	Runsc, RunscShim                            string // make kube-tools: gVisor's runsc and containerd's shim for it
	AgentSandbox, AgentSandboxCRDs              string // make kube-tools: agent-sandbox's controller and its CRDs' directory
	Etcd, Containerd, Shim, Runc, Ctr, Iptables string // Debian's
	Busybox                                     string // busybox-static, for the images
	Loopback                                    string // Debian's CNI loopback plugin
	Go                                          string // builds the CNI plugin nonet
}

// FindTools looks for the tools: kube-apiserver and kubelet in
// $SEALBENCH_KUBE_BIN or where `make kube-tools` puts them, runsc, its
// containerd shim and agent-sandbox's controller and CRDs where `make
// kube-tools` puts them, the CNI
// loopback plugin where Debian puts it, the rest (go among them, which
// builds nonet) on PATH. The error names everything missing and how to
// get it.
func FindTools() (Tools, error) {
	dir := os.Getenv("SEALBENCH_KUBE_BIN")
	kube := func(name string) string {
		if dir != "" {
			return filepath.Join(dir, name)
		}
		return toolcache.Kube(name)
	}
	t := Tools{APIServer: kube("kube-apiserver"), Kubelet: kube("kubelet")}
	var missing []string
	for _, p := range []string{t.APIServer, t.Kubelet} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p+" (run `make kube-tools`, or set SEALBENCH_KUBE_BIN)")
		}
	}
	t.Runsc, t.RunscShim = toolcache.Runsc("runsc"), toolcache.Runsc("containerd-shim-runsc-v1")
	t.AgentSandbox, t.AgentSandboxCRDs = toolcache.AgentSandbox("bin", "agent-sandbox-controller"), toolcache.AgentSandbox("crds")
	for _, p := range []string{t.Runsc, t.RunscShim, t.AgentSandbox, t.AgentSandboxCRDs} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p+" (run `make kube-tools`)")
		}
	}
	for _, c := range []struct {
		p    *string
		name string
	}{{&t.Etcd, "etcd"}, {&t.Containerd, "containerd"}, {&t.Shim, "containerd-shim-runc-v2"}, {&t.Runc, "runc"},
		{&t.Ctr, "ctr"}, {&t.Iptables, "iptables"}, {&t.Busybox, "busybox"}, {&t.Go, "go"}} {
		p, err := exec.LookPath(c.name)
		if err != nil {
			missing = append(missing, c.name+" on PATH (`make kube-tools` installs Debian's)")
		}
		*c.p = p
	}
	t.Loopback = loopbackPlugin
	if _, err := os.Stat(t.Loopback); err != nil {
		missing = append(missing, t.Loopback+" (`make kube-tools` installs Debian's containernetworking-plugins)")
	}
	if missing != nil {
		return t, fmt.Errorf("a Kubernetes test cluster needs %s", strings.Join(missing, ", "))
	}
	return t, nil
}

// Cluster is a running one-node cluster.
type Cluster struct {
	// Dir holds everything the cluster writes: configuration, keys,
	// data, logs (logs/NAME.log), the kubelet's and containerd's roots.
	Dir string
	// Kubeconfig is the path of a kubeconfig for the cluster's admin
	// (group system:masters, a bearer token).
	Kubeconfig string
	// Config, Client and Dynamic are the admin's, from Kubeconfig.
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// CgroupRoot is the kubelet's cgroup root (pods' cgroups are below
	// it) in every cgroup v1 hierarchy: /sealbench-kube-HEX.
	CgroupRoot string
	// ContainerdSocket is the node's containerd's socket, where images
	// are imported (its k8s.io namespace is the kubelet's).
	ContainerdSocket string
	// Started is how long Start took (the images built and imported, the
	// node registered); Stopped how long Stop took.
	Started, Stopped time.Duration

	tools    Tools
	procs    []*proc // in start order; Stop goes backwards
	stopFUSE func()  // ends the /dev/fuse device plugin
	etcdURL  string
	before   hostState
	unlock   func()
	stopped  bool
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Start starts a cluster in a new directory under os.TempDir and returns
// it once its node has registered. It takes the machine-wide lock that
// keeps a second cluster from running beside it (the kubelet's iptables
// chains and kernel settings are the machine's), waiting for it. On
// failure it stops what it started and says what each process logged.
func Start(ctx context.Context, tools Tools) (c *Cluster, err error) {
	t0 := time.Now()
	unlock, err := lockMachine()
	if err != nil {
		return nil, err
	}
	if swept, err := sweepStale(os.TempDir(), tools.Iptables); len(swept) > 0 {
		fmt.Fprintf(os.Stderr, "kubetest: swept what dead clusters left in %v (%v)\n", swept, err)
	}
	// A short directory: containerd's socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		unlock()
		return nil, err
	}
	c = &Cluster{Dir: dir, tools: tools, unlock: unlock, ContainerdSocket: filepath.Join(dir, "containerd", "containerd.sock")}
	c.CgroupRoot = cgroupRootOf(dir)
	defer func() {
		if err != nil {
			logs := c.logTails()
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w; stopping what started: %v", err, serr)
			}
			err = fmt.Errorf("%w%s", err, logs)
			c = nil
		}
	}()
	if c.before, err = readHostState(tools.Iptables); err != nil {
		return c, err
	}
	if b, err := json.Marshal(c.before); err != nil {
		return c, err
	} else if err := os.WriteFile(filepath.Join(dir, beforeFile), b, 0o600); err != nil {
		return c, err
	}
	for _, d := range []string{"logs", "pki", "etcd", "kubelet", "pod-logs", "containerd/root", "containerd/state", "containerd/opt", "cni/bin", "cni/conf"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return c, err
		}
	}
	ports, err := freePorts(4)
	if err != nil {
		return c, err
	}
	etcdClient, etcdPeer, apiPort, kubeletPort := ports[0], ports[1], ports[2], ports[3]
	token := randHex(16)
	if err := c.writeConfig(apiPort, kubeletPort, token); err != nil {
		return c, err
	}

	// etcd serves its clients over TLS and takes only the API server's
	// client certificate; its one member's peer port speaks to no one.
	pki := filepath.Join(dir, "pki")
	etcdURL := fmt.Sprintf("https://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	if err := c.start("etcd", tools.Etcd, "--name", "sealbench", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--cert-file", filepath.Join(pki, "serving.crt"), "--key-file", filepath.Join(pki, "serving.key"),
		"--client-cert-auth", "--trusted-ca-file", filepath.Join(pki, "ca.crt"),
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "sealbench="+peerURL, "--log-level", "warn"); err != nil {
		return c, err
	}
	c.etcdURL = etcdURL
	etcdClientTLS, err := c.clientTLS()
	if err != nil {
		return c, err
	}
	containerdDone := make(chan error, 1)
	go func() { containerdDone <- c.startContainerd(ctx) }()
	if err := c.waitFor(ctx, "etcd", 60*time.Second, func() error {
		return httpOK(&http.Client{Transport: &http.Transport{TLSClientConfig: etcdClientTLS}}, etcdURL+"/health")
	}); err != nil {
		return c, err
	}
	if err := c.start("kube-apiserver", tools.APIServer,
		"--etcd-servers", etcdURL, "--etcd-cafile", filepath.Join(pki, "ca.crt"),
		"--etcd-certfile", filepath.Join(pki, "client.crt"), "--etcd-keyfile", filepath.Join(pki, "client.key"),
		"--kubelet-client-certificate", filepath.Join(pki, "client.crt"), "--kubelet-client-key", filepath.Join(pki, "client.key"),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file", filepath.Join(pki, "serving.crt"), "--tls-private-key-file", filepath.Join(pki, "serving.key"),
		"--cert-dir", filepath.Join(dir, "apiserver"),
		"--token-auth-file", filepath.Join(pki, "tokens.csv"),
		"--authorization-mode", "AlwaysAllow",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--allow-privileged=true",
		"--endpoint-reconciler-type", "none",
		"--kubelet-preferred-address-types", "InternalIP",
		"--profiling=false"); err != nil {
		return c, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return c, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return c, err
	}
	rc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "kube-apiserver", 120*time.Second, func() error {
		return httpOK(rc, c.Config.Host+"/readyz")
	}); err != nil {
		return c, err
	}
	if err := <-containerdDone; err != nil {
		return c, err
	}
	if err := c.makeCgroupRoot(); err != nil {
		return c, err
	}
	if err := c.start("kubelet", tools.Kubelet,
		"--config", filepath.Join(dir, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(dir, "kubelet.kubeconfig"),
		"--root-dir", filepath.Join(dir, "kubelet"),
		"--cert-dir", filepath.Join(dir, "kubelet", "pki"),
		// A kubelet refuses a loopback node IP (it validates its own), so
		// it leaves the node's addresses to a cloud controller, whose part
		// Start plays (initNode).
		"--hostname-override", NodeName, "--cloud-provider", "external"); err != nil {
		return c, err
	}
	// Admission looks the pods' service account up, and no controller
	// manager runs to create it.
	if err := c.waitFor(ctx, "kube-apiserver (the default service account)", 60*time.Second, func() error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return c, err
	}
	if err := c.installRuntimeClass(ctx); err != nil {
		return c, err
	}
	if err := c.installAgentSandbox(ctx); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "kubelet (the node's registration)", 120*time.Second, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
			return errors.New("the node has no kubelet endpoint yet")
		}
		return c.initNode(ctx, n)
	}); err != nil {
		return c, err
	}
	if err := c.startFUSEPlugin(ctx); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "kubelet (/dev/fuse in the node's allocatable resources)", 60*time.Second, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q := n.Status.Allocatable[FUSEResource]; q.IsZero() {
			return fmt.Errorf("the node's allocatable resources have no %s", FUSEResource)
		}
		return nil
	}); err != nil {
		return c, err
	}
	c.Started = time.Since(t0)
	return c, nil
}

// initNode does for the node what a cloud controller would: its address
// (InternalIP 127.0.0.1, where the API server reaches the kubelet for an
// exec) and the removal of the taint that waits for it.
func (c *Cluster) initNode(ctx context.Context, n *corev1.Node) error {
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: NodeName}}
	n, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudUninitializedTaint })
	_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

// cloudUninitializedTaint is the taint a kubelet with an external cloud
// provider registers its node with.
const cloudUninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// clientTLS is the TLS configuration of a client with the API server's
// client certificate that trusts the cluster's CA: etcd's.
func (c *Cluster) clientTLS() (*tls.Config, error) {
	pki := filepath.Join(c.Dir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "client.crt"), filepath.Join(pki, "client.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}, nil
}

// startContainerd starts containerd, its CNI plugins in place, and
// imports the images.
func (c *Cluster) startContainerd(ctx context.Context) error {
	if err := c.setUpCNI(ctx); err != nil {
		return err
	}
	// containerd finds a runtime's shim (containerd-shim-runsc-v1, for
	// io.containerd.runsc.v1) on its PATH.
	env := append(os.Environ(), "PATH="+filepath.Dir(c.tools.RunscShim)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := c.startEnv("containerd", env, c.tools.Containerd, "--config", filepath.Join(c.Dir, "containerd.toml")); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", 60*time.Second, func() error {
		_, err := c.ctr("version")
		return err
	}); err != nil {
		return err
	}
	for _, im := range []struct {
		ref string
		cmd []string
	}{{PauseImage, []string{"sleep", "2147483647"}}, {BusyboxImage, []string{"sh"}}} {
		var b bytes.Buffer
		if _, err := testimage.BusyboxCmd(c.tools.Busybox, im.ref, im.cmd, &b); err != nil {
			return fmt.Errorf("building %s: %w", im.ref, err)
		}
		if err := c.ImportImage(&b); err != nil {
			return fmt.Errorf("importing %s: %w", im.ref, err)
		}
	}
	return nil
}

// ImportImage imports an image archive (`docker save`'s or an OCI
// layout's tar) into the node's containerd, where the kubelet finds it.
func (c *Cluster) ImportImage(archive *bytes.Buffer) error {
	cmd := exec.Command(c.tools.Ctr, "--address", c.ContainerdSocket, "--namespace", "k8s.io", "images", "import", "-")
	cmd.Stdin = archive
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// ctr runs ctr against the cluster's containerd, in the k8s.io namespace.
func (c *Cluster) ctr(args ...string) ([]byte, error) {
	cmd := exec.Command(c.tools.Ctr, append([]string{"--address", c.ContainerdSocket, "--namespace", "k8s.io", "--timeout", "20s"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(ee.Stderr))
		}
		return out, fmt.Errorf("ctr %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// start starts a process whose output goes to logs/NAME.log; the kernel
// kills it if the test binary dies first.
func (c *Cluster) start(name, path string, args ...string) error {
	return c.startEnv(name, nil, path, args...)
}

// startEnv is start with the environment env (nil: this process's).
func (c *Cluster) startEnv(name string, env []string, path string, args ...string) error {
	log := filepath.Join(c.Dir, "logs", name+".log")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir, cmd.Env = c.Dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	c.procs = append(c.procs, p)
	return nil
}

// waitFor polls ready until it returns nil, the process name died, or
// the time is up.
func (c *Cluster) waitFor(ctx context.Context, name string, limit time.Duration, ready func() error) error {
	proc := strings.Fields(name)[0]
	deadline := time.Now().Add(limit)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		for _, p := range c.procs {
			if p.name != proc {
				continue
			}
			select {
			case <-p.done:
				return fmt.Errorf("%s exited while starting: %v", p.name, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", name, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logTails is the end of every process's log, for an error.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, p := range c.procs {
		out, _ := os.ReadFile(p.log)
		if len(out) > 3000 {
			out = out[len(out)-3000:]
		}
		fmt.Fprintf(&b, "\n--- %s's log (the end):\n%s", p.name, out)
	}
	return b.String()
}

func httpOK(client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freePorts returns n loopback TCP ports nothing listens on now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lockMachine takes the lock a cluster holds for its whole life, waiting
// for it: the kubelet's iptables chains and kernel settings are the
// machine's, so two clusters may not overlap.
func lockMachine() (func(), error) {
	return testenv.LockMachine("sealbench-kube-cluster.lock", "the machine for a Kubernetes test cluster")
}
