//go:build kubetest

package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/kubetest"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtest"
	"github.com/sealbench/sealbench/provision/kubernetes"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

// engineChild, as the test binary's first argument, makes it the
// kube-engine (the target starts it as `sealbench kube-engine` does).
const engineChild = "kube-engine-child"

// runner runs the tests and what goes around them.
type runner func() int

func (r runner) Run() int { return r() }

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == engineChild {
		serveEngine(os.Args[2:])
		return
	}
	provisiontest.Main(runner(func() int { return kubetest.Main(m) }))
}

func serveEngine(args []string) {
	cfg, err := kubeengine.ParseArgs(args)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		err = kubeengine.Serve(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-engine:", err)
		os.Exit(1)
	}
}

// newTarget is the kubernetes target of run on the test cluster, its
// kube-engine this test binary.
func newTarget(t *testing.T, c *kubetest.Cluster, run *runs.Run) *kubernetes.Kubernetes {
	return newNamedTarget(t, c, run, "", "")
}

// newNamedTarget is newTarget as --target name=kubernetes@node makes it:
// its kind recorded for teardown first, as the host does.
func newNamedTarget(t *testing.T, c *kubetest.Cluster, run *runs.Run, name, node string) *kubernetes.Kubernetes {
	return newTargetOf(t, c, run, name, node, "")
}

// newTargetOf is newNamedTarget with the RuntimeClass runtimeClass
// (--target kubernetes:RUNTIMECLASS).
func newTargetOf(t *testing.T, c *kubetest.Cluster, run *runs.Run, name, node, runtimeClass string) *kubernetes.Kubernetes {
	return newTargetWith(t, c, run, name, node, runtimeClass, false)
}

// newTargetWith is newTargetOf, the agent-sandbox target when
// agentSandbox (--target agent-sandbox[:RUNTIMECLASS]).
func newTargetWith(t *testing.T, c *kubetest.Cluster, run *runs.Run, name, node, runtimeClass string, agentSandbox bool) *kubernetes.Kubernetes {
	return newTargetOpts(t, c, run, kubernetes.Options{Name: name, Node: node, RuntimeClass: runtimeClass, AgentSandbox: agentSandbox})
}

// newTargetOpts is the target o says on the test cluster, its kube-engine
// this test binary (engineChild); o's cluster fields are the fixture's.
func newTargetOpts(t *testing.T, c *kubetest.Cluster, run *runs.Run, o kubernetes.Options) *kubernetes.Kubernetes {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "" {
		if err := runs.RecordTargetKind(run.Dir, o.Name, kubernetes.Name); err != nil {
			t.Fatal(err)
		}
	}
	o.Run, o.EngineCommand, o.Log = run, []string{exe, engineChild}, t.Logf
	o.Kube = kubernetes.Flags{Kubeconfig: c.Kubeconfig, Containerd: c.ContainerdSocket,
		// The fixture's kubelet has its root directory in the cluster's.
		SeccompDir: filepath.Join(c.Dir, "kubelet", "seccomp")}
	k, err := kubernetes.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestConformance: the suite every target passes, on the test cluster:
// Sandboxes as pods with /dev/fuse and no network, confined execs through
// the exec subresource, everything in the ledger, nothing left.
func TestConformance(t *testing.T) {
	c := kubetest.Shared(t)
	img := chrootImage(t, "sealbench/sandbox-test:kube", "sh")
	provisiontest.Run(t, &provisiontest.Suite{
		New:    func(t *testing.T, run *runs.Run) provision.Target { return newTarget(t, c, run) },
		Image:  img,
		Engine: manifests.EngineKubernetes,
	})
}

// TestAgentSandboxConformance: the suite on the agent-sandbox target, its
// RuntimeClass gvisor: each Sandbox an agent-sandbox Sandbox whose pod
// agent-sandbox's controller makes, under gVisor; everything in the
// ledger, nothing left.
func TestAgentSandboxConformance(t *testing.T) {
	c := kubetest.Shared(t)
	img := chrootImage(t, "sealbench/sandbox-test:kube", "sh")
	provisiontest.Run(t, &provisiontest.Suite{
		New: func(t *testing.T, run *runs.Run) provision.Target {
			return newTargetWith(t, c, run, "", "", kubetest.GVisorRuntimeClass, true)
		},
		Image:  img,
		Engine: manifests.EngineKubernetes,
	})
}

// notEmulated is the kubernetes target as vmtest.Twelve drives it.
type notEmulated struct{ *kubernetes.Kubernetes }

func (notEmulated) Emulated() bool { return false }

// TestTwelveCellsLikeLocal: the twelve cells on local and on the test
// cluster's node, which is this host: the same kernel, so every count
// (FUSE requests by opcode, SQLite statements, files, bytes) is equal;
// then the target's inventory, Destroy, and a teardown that leaves
// nothing. The target is named for its node, as --target
// kubernetes@NODE names it: its directory, record, NetworkPolicy and
// ledger entries carry that name, and teardown finds its Backend by the
// kind the run recorded for it.
func TestTwelveCellsLikeLocal(t *testing.T) {
	c := kubetest.Shared(t)
	name := kubernetes.Name + "-" + kubetest.NodeName
	tw := thisNode(t, name)
	tw.New = func(t *testing.T, run *runs.Run, dir string, m *manifests.BundleManifest, img engine.Image) vmtest.EmulatedTarget {
		return notEmulated{newNamedTarget(t, c, run, name, kubetest.NodeName)}
	}
	tw.TwelveCellsLikeLocal(t)
}

// thisNode is vmtest.Twelve for a target named name on the test
// cluster's node, which is this host (its CPUs, memory and kernel), but
// its New.
func thisNode(t *testing.T, name string) vmtest.Twelve {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	return vmtest.Twelve{Name: name, CPUs: runtime.NumCPU(), MemoryBytes: int64(si.Totalram) * int64(si.Unit),
		Kernel: unix.ByteSliceToString(uts.Release[:]),
		// The target's directory, the kube-engine and its socket, the
		// image in the node's containerd, the NetworkPolicy.
		Holds: map[manifests.ResourceKind]int{manifests.ResourceDir: 1, manifests.ResourceProcess: 1, manifests.ResourceSocket: 1,
			manifests.ResourceImage: 1, manifests.ResourceKubeObject: 1},
		Dir: func(vm vmtest.EmulatedTarget) string { return vm.(notEmulated).Dir() },
	}
}

// TestCellsOnGVisorLikeLocal: kubernetes:gvisor, the test cluster's
// RuntimeClass whose handler is containerd's runsc shim, runs the cells
// gVisor can run with every verifier passing and every count equal to
// local's but those the report explains (gVisor's FUSE is not Linux's);
// C12 is ineligible with the gvisor target's reason, since the target's
// pins say gVisor's FUSE serves it. Then the same lifecycle and teardown.
func TestCellsOnGVisorLikeLocal(t *testing.T) {
	c := kubetest.Shared(t)
	tw := thisNode(t, kubernetes.Name)
	// Three cells, to keep CI's time: one of many small files, one
	// reading the 64 MiB base file, and C12. All twelve passed the same
	// way (2026-12-07, 273 s: every gVisor cell about a minute).
	tw.Cells = []string{"C01", "C09", "C12"}
	tw.Ineligible = map[string]string{"C12": "gVisor's FUSE cannot mmap(2) a file"}
	tw.New = func(t *testing.T, run *runs.Run, dir string, m *manifests.BundleManifest, img engine.Image) vmtest.EmulatedTarget {
		return notEmulated{newTargetOf(t, c, run, "", "", kubetest.GVisorRuntimeClass)}
	}
	tw.TwelveCellsLikeLocal(t)
}

// TestAuditFindsALeftLease: a node's Lease that a kube-engine left when it
// died (it holds the node for its run, labelled with it) is listed by the
// audit and removed by its fix, as the run's pods are.
func TestAuditFindsALeftLease(t *testing.T) {
	c := kubetest.Shared(t)
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	ctx := context.Background()
	const run = "20261202T103000-1ea5e0"
	holder, now := run, metav1.NewMicroTime(time.Now())
	name := kubeengine.LeaseName("gone-node")
	leases := c.Client.CoordinationV1().Leases("default")
	if _, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{manifests.RunLabel: run}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	opts := runs.AuditOptions{StateDir: t.TempDir(), Run: run}
	res, err := runs.Audit(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "leases/default/" + name
	if len(res.Leftovers) != 1 || res.Leftovers[0].Key != want || res.Leftovers[0].Kind != manifests.ResourceKubeObject {
		t.Fatalf("the audit of run %s lists %v, want the Lease %s", run, res.Leftovers, want)
	}
	t.Logf("the audit lists %s", res.Leftovers[0])
	if res, err := runs.Fix(ctx, opts, t.Logf); err != nil || len(res.Leftovers) != 0 {
		t.Fatalf("the fix: %v, left %v", err, res)
	}
	if _, err := leases.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease after the fix: %v, want it gone", err)
	}
}
