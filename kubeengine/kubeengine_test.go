//go:build kubetest && linux

package kubeengine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/kubetest"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

const (
	namespace = "default"
	runID     = "kubeenginetest"
)

// newEngine serves a kube-engine on the shared cluster for the test and
// returns a docker client of it.
func newEngine(t testing.TB) (*client.Client, *kubetest.Cluster) {
	t.Helper()
	return newEngineOf(t, runID)
}

// newEngineOf is newEngine for another run.
func newEngineOf(t testing.TB, run string) (*client.Client, *kubetest.Cluster) {
	t.Helper()
	return newEngineWith(t, run, nil)
}

// newEngineWith is newEngineOf with the kube-engine's Config changed by edit.
func newEngineWith(t testing.TB, run string, edit func(*kubeengine.Config)) (*client.Client, *kubetest.Cluster) {
	t.Helper()
	c := kubetest.Shared(t)
	dir, err := os.MkdirTemp("", "ke-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := kubeengine.Config{Socket: filepath.Join(dir, "engine.sock"), Kubeconfig: c.Kubeconfig, Namespace: namespace,
		Node: kubetest.NodeName, FUSEResource: kubetest.FUSEResource, RunID: run,
		// The kubelet's root directory is the fixture's kubelet/ (internal/kubetest: Start).
		Containerd: c.ContainerdSocket, SeccompDir: filepath.Join(c.Dir, "kubelet", "seccomp")}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- kubeengine.Serve(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Stat(cfg.Socket); !os.IsNotExist(err) {
			t.Errorf("the socket is left after Serve: %v", err)
		}
		os.RemoveAll(dir)
	})
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+cfg.Socket), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	for range 100 { // Serve listens from its goroutine
		if _, err = cli.Ping(context.Background()); err == nil {
			break
		}
		if _, serr := os.Stat(cfg.Socket); serr != nil {
			select {
			case err := <-done:
				t.Fatalf("Serve: %v", err)
			default:
			}
		}
		exec.Command("sleep", "0.05").Run()
	}
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	return cli, c
}

// The test image: busybox, and coreutils' chroot from this machine with
// the libraries it links (what an exec as another user needs), loaded
// through the engine once per binary.
var testImage struct {
	sync.Mutex
	id manifests.Digest
}

func chrootImage(t testing.TB) (manifests.Digest, *bytes.Buffer) {
	t.Helper()
	var w bytes.Buffer
	id, err := testimage.BusyboxWith(testenv.NeedCommand(t, "busybox"), "localhost/kubeengine-test:1", []string{"sleep", "600"},
		[]string{testenv.NeedCommand(t, "chroot")}, &w)
	if err != nil {
		t.Fatal(err)
	}
	return id, &w
}

func mustDigest(t testing.TB, s string) manifests.Digest {
	d, err := manifests.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// loadImage loads the test image through cli once per binary.
func loadImage(t testing.TB, cli *client.Client) manifests.Digest {
	t.Helper()
	testImage.Lock()
	defer testImage.Unlock()
	if !testImage.id.IsZero() {
		return testImage.id
	}
	id, tarb := chrootImage(t)
	resp, err := cli.ImageLoad(context.Background(), tarb, client.ImageLoadWithQuiet(true))
	if err != nil {
		t.Fatalf("ImageLoad: %v", err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(out), "Loaded image ID: "+id.String()) {
		t.Errorf("ImageLoad answered %s, want it to name %s", out, id)
	}
	testImage.id = id
	return id
}

func TestIdentityIsTheNodes(t *testing.T) {
	cli, c := newEngine(t)
	ctx := context.Background()
	n, err := c.Client.CoreV1().Nodes().Get(ctx, kubetest.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ver, err := cli.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ver.Platform.Name != kubeengine.PlatformName || ver.KernelVersion != n.Status.NodeInfo.KernelVersion || ver.APIVersion == "" {
		t.Errorf("version %+v: want platform %q and the node's kernel %s", ver, kubeengine.PlatformName, n.Status.NodeInfo.KernelVersion)
	}
	comps := map[string]string{}
	for _, cv := range ver.Components {
		comps[cv.Name] = cv.Version
	}
	if !strings.HasPrefix(comps["Kubernetes"], "v1.") || !strings.HasPrefix(comps["ContainerRuntime"], "containerd://") {
		t.Errorf("components %v: want Kubernetes' version and containerd's", comps)
	}
	// The node is this machine: what the engine says of it is true here.
	uname := func(flag string) string {
		out, err := exec.Command("uname", flag).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	id, err := engine.IdentifyClient(ctx, cli, "kubernetes", "unix:///x")
	if err != nil {
		t.Fatal(err)
	}
	if id.Kernel != uname("-r") || id.Arch != uname("-m") || id.CPUs != int(n.Status.Capacity.Cpu().Value()) ||
		id.MemoryBytes != n.Status.Capacity.Memory().Value() || id.OS != n.Status.NodeInfo.OSImage || id.EngineVersion == "" {
		t.Errorf("identity %+v: want kernel %s, arch %s, the node's CPUs, memory and OS image", id, uname("-r"), uname("-m"))
	}
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != kubetest.NodeName || info.DefaultRuntime == "" || len(info.Runtimes) == 0 {
		t.Errorf("info names node %q, runtime %q %v", info.Name, info.DefaultRuntime, info.Runtimes)
	}
}

func TestImageLoadAndInspect(t *testing.T) {
	cli, _ := newEngine(t)
	id := loadImage(t, cli)
	got, err := cli.ImageInspect(context.Background(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id.String() {
		t.Errorf("image id %s, want %s", got.ID, id)
	}
	missing := manifests.DigestOf([]byte("no such image"))
	if _, err := cli.ImageInspect(context.Background(), missing.String()); !errdefs.IsNotFound(err) {
		t.Errorf("inspecting a missing image: %v, want not found", err)
	}
}

// sandboxConfig is a Sandbox as every run makes one on dockerd: with
// engine.DockerSeccompProfile, which refuses new namespaces.
func sandboxConfig(id manifests.Digest, cmd ...string) (*container.Config, *container.HostConfig) {
	return engine.SandboxConfig(runID, id, cmd, manifests.EngineDockerd, "", false)
}

func create(t testing.TB, cli *client.Client, cname string, cfg *container.Config, hc *container.HostConfig) string {
	t.Helper()
	resp, err := cli.ContainerCreate(context.Background(), cfg, hc, &network.NetworkingConfig{}, nil, cname)
	if err != nil {
		t.Fatalf("creating %s: %v", cname, err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
	return resp.ID
}

func TestContainerLifecycle(t *testing.T) {
	cli, c := newEngine(t)
	ctx := context.Background()
	img := loadImage(t, cli)
	cfg, hc := sandboxConfig(img, "sh", "-c", "echo out; echo err >&2; test -c /dev/fuse || echo no fuse; ls /sys/class/net; exit 3")
	id := create(t, cli, "ke-life", cfg, hc)
	if _, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, "ke-life"); !errdefs.IsConflict(err) {
		t.Errorf("a second create of the name: %v, want a conflict", err)
	}
	insp, err := cli.ContainerInspect(ctx, "ke-life")
	if err != nil {
		t.Fatal(err)
	}
	if insp.ID != id || insp.Name != "/ke-life" || insp.State.Status != container.StateCreated || insp.Config.Labels[manifests.RunLabel] != runID {
		t.Errorf("before start: %+v %+v labels %v", insp.ContainerJSONBase, insp.State, insp.Config.Labels)
	}
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, errC := cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case r := <-waitC:
		if r.StatusCode != 3 {
			t.Errorf("wait: exit %d, want 3", r.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	logs, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, logs)
	logs.Close()
	// The kubelet keeps one log of both streams, in no set order between them.
	if lines := strings.Fields(out.String()); err != nil || len(lines) != 3 || !slices.Contains(lines, "out") || !slices.Contains(lines, "err") || !slices.Contains(lines, "lo") {
		t.Errorf("logs %q (%v), want out, err and only lo", out.String(), err)
	}
	insp, err = cli.ContainerInspect(ctx, id)
	if err != nil || insp.State.Status != container.StateExited || insp.State.ExitCode != 3 || !slices.Equal(insp.HostConfig.CapAdd, hc.CapAdd) {
		t.Errorf("after the exit: %+v, CapAdd %v (%v)", insp.State, insp.HostConfig.CapAdd, err)
	}
	if err := cli.ContainerRemove(ctx, "ke-life", container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(ctx, id); !errdefs.IsNotFound(err) {
		t.Errorf("inspect after remove: %v, want not found", err)
	}
	if err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); !errdefs.IsNotFound(err) {
		t.Errorf("remove after remove: %v, want not found", err)
	}
	if _, err := c.Client.CoreV1().Pods(namespace).Get(ctx, kubeengine.PodName("ke-life"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod after remove: %v", err)
	}
	// What cannot be a pod is refused, saying what.
	hc.Devices = append(hc.Devices, container.DeviceMapping{PathOnHost: "/dev/kvm", PathInContainer: "/dev/kvm"})
	hc.NetworkMode = "host"
	_, err = cli.ContainerCreate(ctx, cfg, hc, nil, nil, "ke-bad")
	if !errdefs.IsInvalidParameter(err) || !strings.Contains(err.Error(), "/dev/kvm") || !strings.Contains(err.Error(), `"host"`) {
		t.Errorf("creating with /dev/kvm and the host's network: %v, want a 400 naming both", err)
	}
}

func TestExec(t *testing.T) {
	cli, _ := newEngine(t)
	ctx := context.Background()
	cfg, hc := sandboxConfig(loadImage(t, cli), "sleep", "600")
	id := create(t, cli, "ke-exec", cfg, hc)
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	sh := func(script string) []string { return []string{"/bin/sh", "-c", script} }
	if r := testenv.OfficialExec(t, cli, id, container.ExecOptions{Cmd: sh("cat; echo to-err >&2; exit 5")}, "from stdin\n"); r.Stdout != "from stdin\n" || r.Stderr != "to-err\n" || r.Code != 5 || r.Pid <= 0 {
		t.Errorf("stdin, stdout, stderr, exit: %+v", r)
	}
	if r := testenv.OfficialExec(t, cli, id, container.ExecOptions{Cmd: sh(`pwd; echo "$FOO|$BAR"`), WorkingDir: "/tmp", Env: []string{"FOO=it's", "BAR=a b"}}, ""); r.Stdout != "/tmp\nit's|a b\n" || r.Code != 0 {
		t.Errorf("working directory and environment: %+v", r)
	}
	r := testenv.OfficialExec(t, cli, id, container.ExecOptions{Cmd: sh("id -u; id -g; id -G; cat /proc/self/status"), User: "65534:65534"}, "")
	lines := strings.Split(r.Stdout, "\n")
	if r.Code != 0 || len(lines) < 3 || lines[0] != "65534" || lines[1] != "65534" || lines[2] != "65534" {
		t.Fatalf("as 65534:65534: %+v", r)
	}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapAmb":
			if v != "0000000000000000" {
				t.Errorf("as 65534: %s %s", k, v)
			}
		case "NoNewPrivs":
			if v != "1" {
				t.Errorf("as 65534: NoNewPrivs %s", v)
			}
		}
	}
	// The Sandbox's CAP_SYS_ADMIN would let RuntimeDefault allow a user
	// namespace; the dockerd profile, a Localhost one here, refuses it.
	if r := testenv.OfficialExec(t, cli, id, container.ExecOptions{Cmd: sh("busybox unshare -U true && echo ESCAPED"), User: "65534:65534"}, ""); r.Code == 0 || strings.Contains(r.Stdout, "ESCAPED") {
		t.Errorf("unshare -U as 65534: %+v", r)
	}
	if root := testenv.OfficialExec(t, cli, id, container.ExecOptions{Cmd: sh("id -u; cat /proc/self/status")}, ""); !strings.HasPrefix(root.Stdout, "0\n") || !strings.Contains(root.Stdout, "NoNewPrivs:\t1") {
		t.Errorf("as the container's user: %+v", root)
	}
	// A missing working directory: the exec never started (126, no pid),
	// and stdout says why, as dockerd's does.
	if r := testenv.OfficialExec(t, cli, id, container.ExecOptions{Cmd: sh("echo ran"), WorkingDir: "/no/such/dir"}, ""); r.Code != 126 || r.Pid != 0 || !strings.Contains(r.Stdout, "/no/such/dir") || strings.Contains(r.Stdout, "ran") {
		t.Errorf("in a missing directory: %+v", r)
	}
	if _, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"true"}, Privileged: true}); !errdefs.IsInvalidParameter(err) {
		t.Errorf("a privileged exec in an unprivileged container: %v, want 400", err)
	}
}

// TestLeaseRunsOneRunAtATime: a run holds the node while it has pods
// there (several at once, as the conformance suite keeps), and another
// run's Sandbox starts only once the first run's last pod is gone; the
// Lease goes with the last pod.
func TestLeaseRunsOneRunAtATime(t *testing.T) {
	cli, c := newEngine(t)
	other, _ := newEngineOf(t, runID+"-other")
	ctx := context.Background()
	img := loadImage(t, cli)
	cfg, hc := sandboxConfig(img, "sleep", "600")
	a1 := create(t, cli, "ke-lease-a1", cfg, hc)
	a2 := create(t, cli, "ke-lease-a2", cfg, hc)
	b := create(t, other, "ke-lease-b", cfg, hc)
	lease := func() string {
		l, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, kubeengine.LeaseName(kubetest.NodeName), metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		// Labelled with its holder, for the audit.
		if run := l.Labels[manifests.RunLabel]; run != *l.Spec.HolderIdentity {
			return fmt.Sprintf("%s, but labelled %s=%q", *l.Spec.HolderIdentity, manifests.RunLabel, run)
		}
		return *l.Spec.HolderIdentity
	}
	for _, id := range []string{a1, a2} {
		if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if h := lease(); h != runID {
		t.Fatalf("the node's Lease while the run's two Sandboxes run: held by %s, want %s", h, runID)
	}
	// b's start returns only once both of a's pods are gone.
	aGoneAtB := make(chan error, 1)
	go func() {
		if err := other.ContainerStart(ctx, b, container.StartOptions{}); err != nil {
			aGoneAtB <- err
			return
		}
		for _, n := range []string{"ke-lease-a1", "ke-lease-a2"} {
			if _, err := c.Client.CoreV1().Pods(namespace).Get(ctx, kubeengine.PodName(n), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				aGoneAtB <- errors.New("b started while " + n + "'s pod was still there")
				return
			}
		}
		aGoneAtB <- nil
	}()
	for _, id := range []string{a1, a2} {
		exec.Command("sleep", "1").Run() // time for b's start to go wrong, if it would
		if err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-aGoneAtB; err != nil {
		t.Fatal(err)
	}
	if h := lease(); h != runID+"-other" {
		t.Errorf("the node's Lease while the other run's Sandbox runs: held by %s", h)
	}
	if err := other.ContainerRemove(ctx, b, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, kubeengine.LeaseName(kubetest.NodeName), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease after the last Sandbox went: %v", err)
	}
}

func TestSecondEngineFindsThePod(t *testing.T) {
	first, _ := newEngine(t)
	second, _ := newEngine(t)
	ctx := context.Background()
	cfg, hc := sandboxConfig(loadImage(t, first), "sleep", "600")
	id := create(t, first, "ke-second", cfg, hc)
	if err := first.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	insp, err := second.ContainerInspect(ctx, id)
	if err != nil || insp.Name != "/ke-second" || !insp.State.Running || insp.Config.Labels[manifests.RunLabel] != runID {
		t.Fatalf("the second engine inspects by id: %+v (%v)", insp, err)
	}
	// A third, which has not seen it, removes it by name.
	third, _ := newEngine(t)
	if err := third.ContainerRemove(ctx, "ke-second", container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.ContainerInspect(ctx, id); !errdefs.IsNotFound(err) {
		t.Errorf("the first engine after the third removed it: %v, want not found", err)
	}
}

func TestStartFailsWithTheReason(t *testing.T) {
	cli, _ := newEngine(t)
	cfg, hc := sandboxConfig(manifests.DigestOf([]byte("an image the node lacks")), "sleep", "600")
	id := create(t, cli, "ke-noimage", cfg, hc)
	err := cli.ContainerStart(context.Background(), id, container.StartOptions{})
	// The kubelet's reason, its event, and the node's state beside them.
	for _, want := range []string{"ErrImageNeverPull", "; events ", `ErrImageNeverPull: Container image "sha256:`, "node " + kubetest.NodeName + ": healthy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("starting with an image the node lacks: %v, want it to say %q", err, want)
		}
	}
}

// A pod that can never start says why, in the cluster's words: a
// resource the node cannot give fails at once with the kubelet's
// rejection; a pod whose sandbox the runtime cannot make (a RuntimeClass
// whose handler containerd lacks) stays Pending, and when start gives up
// it names the kubelet's events, not only how long it waited.
func TestStartSaysWhyThePodNeverRan(t *testing.T) {
	ctx := context.Background()
	t.Run("unsatisfiable", func(t *testing.T) {
		cli, _ := newEngine(t)
		cfg, hc := sandboxConfig(loadImage(t, cli), "sleep", "600")
		hc.NanoCPUs = 1000 * 1e9
		id := create(t, cli, "ke-toomanycpus", cfg, hc)
		err := cli.ContainerStart(ctx, id, container.StartOptions{})
		t.Logf("start: %v", err)
		for _, want := range []string{"the pod failed", "phase Failed (OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu",
			"events OutOfcpu", "node " + kubetest.NodeName + ": healthy"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("starting a pod asking for 1,000 CPUs: %v, want it to say %q", err, want)
			}
		}
	})
	t.Run("no runtime handler", func(t *testing.T) {
		c := kubetest.Shared(t)
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "sealbench-nohandler"}, Handler: "nohandler"}
		if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Client.NodeV1().RuntimeClasses().Delete(ctx, rc.Name, metav1.DeleteOptions{}) })
		cli, _ := newEngineWith(t, runID, func(cfg *kubeengine.Config) {
			cfg.RuntimeClass, cfg.StartTimeout = rc.Name, 10*time.Second
		})
		cfg, hc := sandboxConfig(loadImage(t, cli), "sleep", "600")
		id := create(t, cli, "ke-nohandler", cfg, hc)
		err := cli.ContainerStart(ctx, id, container.StartOptions{})
		t.Logf("start: %v", err)
		for _, want := range []string{"the pod did not run within 10s", "phase Pending", "container sandbox waiting: ContainerCreating",
			"; events ", "FailedCreatePodSandBox: Failed to create pod sandbox", `no runtime for "nohandler" is configured`,
			"node " + kubetest.NodeName + ": healthy"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("starting a pod whose runtime handler containerd lacks: %v, want it to say %q", err, want)
			}
		}
	})
}

func TestUnservedCallIs501(t *testing.T) {
	cli, _ := newEngine(t)
	err := cli.ContainerPause(context.Background(), "whatever")
	if !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), "/containers/whatever/pause") {
		t.Errorf("pause: %v, want 501 naming the call", err)
	}
}

// Runs last: the tests above leave nothing of kube-engine's in the cluster.
func TestNothingLeft(t *testing.T) {
	c := kubetest.Shared(t)
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: kubeengine.LabelID})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("pod %s is left", p.Name)
	}
	if _, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, kubeengine.LeaseName(kubetest.NodeName), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the node's Lease is left: %v", err)
	}
	// The image the tests loaded goes as a teardown removes it: by its id,
	// every name with it.
	testImage.Lock()
	defer testImage.Unlock()
	if testImage.id.IsZero() {
		return
	}
	cli, _ := newEngine(t)
	id := testImage.id.String()
	if _, err := cli.ImageRemove(ctx, id, image.RemoveOptions{}); err != nil {
		t.Errorf("removing the test image: %v", err)
	}
	testImage.id = manifests.Digest{}
	if _, err := cli.ImageInspect(ctx, id); !errdefs.IsNotFound(err) {
		t.Errorf("the test image after its removal: %v, want not found", err)
	}
	if _, err := cli.ImageRemove(ctx, id, image.RemoveOptions{}); !errdefs.IsNotFound(err) {
		t.Errorf("removing it again: %v, want not found", err)
	}
}
