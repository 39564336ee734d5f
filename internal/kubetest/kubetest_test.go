//go:build linux && kubetest

package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/internal/testenv"
)

// TestMain stops the one cluster every test here shares, and fails the
// binary when that leaves anything behind (Main).
func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestNodeRegisters: the kubelet registered the node with the API
// server, as the version make kube-tools built, running containerd, and
// the node is Ready (its network plugin, nonet, is there).
func TestNodeRegisters(t *testing.T) {
	c := Shared(t)
	ctx := context.Background()
	n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := n.Status.NodeInfo
	t.Logf("node %s: kubelet %s, %s, kernel %s, %s CPUs, %s memory", n.Name, info.KubeletVersion,
		info.ContainerRuntimeVersion, info.KernelVersion, n.Status.Capacity.Cpu(), n.Status.Capacity.Memory())
	if want := "v1.34."; !strings.HasPrefix(info.KubeletVersion, want) {
		t.Errorf("kubelet version %q, want %s*", info.KubeletVersion, want)
	}
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("container runtime %q, want containerd", info.ContainerRuntimeVersion)
	}
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != info.KubeletVersion {
		t.Errorf("API server %s, kubelet %s: built from different versions", v.GitVersion, info.KubeletVersion)
	}
	var addr string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
		}
	}
	if addr != "127.0.0.1" {
		t.Errorf("node addresses %v, want InternalIP 127.0.0.1", n.Status.Addresses)
	}
	// With a network plugin (nonet), the kubelet reports the node Ready.
	for {
		var ready *corev1.NodeCondition
		for i, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = &n.Status.Conditions[i]
			}
		}
		if ready != nil && ready.Status == corev1.ConditionTrue {
			t.Logf("node Ready since %s after its registration", ready.LastTransitionTime.Sub(n.CreationTimestamp.Time))
			break
		}
		if time.Since(n.CreationTimestamp.Time) > testenv.Patience {
			t.Errorf("node not Ready %v after its registration: %+v", testenv.Patience, ready)
			break
		}
		time.Sleep(500 * time.Millisecond)
		if n, err = c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What Stop will have to remove is there: the kubelet's iptables
	// chains, and its cgroups under the cluster's root.
	chains, err := kubeChains(c.tools.Iptables)
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for ch := range chains {
		if !c.before.Chains[ch] {
			added = append(added, ch)
		}
	}
	t.Logf("the kubelet's iptables chains: %v", added)
	if len(added) == 0 {
		t.Error("the kubelet added no KUBE-* iptables chain")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory" + c.CgroupRoot + "/kubepods"); err != nil {
		t.Errorf("the kubelet's pods' cgroup: %v", err)
	}
}

// TestOnlyTheAPIServerGetsIn: the kubelet's API and etcd, on loopback
// ports any local user reaches, refuse a client without the API server's
// certificate, and take one with it.
func TestOnlyTheAPIServerGetsIn(t *testing.T) {
	c := Shared(t)
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubelet := fmt.Sprintf("https://127.0.0.1:%d/pods", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	withCert, err := c.clientTLS()
	if err != nil {
		t.Fatal(err)
	}
	withCert.InsecureSkipVerify = true // the kubelet's own self-signed serving certificate
	anonymous := &tls.Config{InsecureSkipVerify: true}
	etcdCA := &tls.Config{RootCAs: withCert.RootCAs}
	get := func(url string, cfg *tls.Config) error {
		return httpOK(&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, url)
	}
	if err := get(kubelet, anonymous); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("the kubelet's API without a client certificate: %v, want 401 Unauthorized", err)
	}
	if err := get(kubelet, withCert); err != nil {
		t.Errorf("the kubelet's API with the API server's client certificate: %v", err)
	}
	if err := get(c.etcdURL+"/health", etcdCA); err == nil {
		t.Error("etcd answered a client without a certificate")
	}
	withCert.InsecureSkipVerify = false
	if err := get(c.etcdURL+"/health", withCert); err != nil {
		t.Errorf("etcd with the API server's client certificate: %v", err)
	}
}

// TestPodSeesDevFuse: a pod as the kubernetes target's Sandboxes will be
// (no network: its own namespace with only lo, through nonet; no
// service-account token, every taint tolerated, its node named,
// /dev/fuse its only device beyond the defaults) runs; it has no network
// (checkNoNetwork); an exec through the pod's exec subresource opens
// /dev/fuse in it and reads what it printed; the pod is deleted, and its
// containers with it.
func TestPodSeesDevFuse(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := c.Client.CoreV1().Pods("default")
	t0 := time.Now()
	pod, err := pods.Create(ctx, fusePod("fuse"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pods.Delete(context.Background(), pod.Name, *metav1.NewDeleteOptions(0))
	})
	if pod, err = waitPod(ctx, c, pod.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
		t.Fatal(err)
	}
	t.Logf("pod running %s after its creation", time.Since(t0).Round(time.Millisecond))

	if pod.Status.PodIP != NoNetPodIP {
		t.Errorf("pod IP %q, want nonet's %s", pod.Status.PodIP, NoNetPodIP)
	}
	checkNoNetwork(ctx, t, c, pod.Name)
	// Its network namespace is mounted under the cluster's directory
	// (containerd's state), where Stop unmounts what is left, not in
	// /run/netns.
	all, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	var netns []string
	for _, m := range all {
		if m.FSType == "nsfs" && strings.Contains(m.Point, "/netns/") {
			netns = append(netns, m.Point)
		}
	}
	if len(netns) != 1 || !under(netns[0], c.Dir) {
		t.Errorf("network namespaces mounted: %v, want the pod's alone, under %s", netns, c.Dir)
	}

	stdout, stderr, err := c.Exec(ctx, "default", pod.Name, "main",
		"sh", "-c", `ls -l /dev/fuse && cat /proc/self/status | grep CapEff && exec 3<>/dev/fuse && echo opened /dev/fuse`)
	if err != nil {
		t.Fatalf("exec: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	t.Logf("exec's output:\n%s", stdout)
	if !strings.Contains(stdout, "opened /dev/fuse") || !strings.Contains(stdout, "10,") {
		t.Errorf("the pod does not see /dev/fuse as the character device 10,229:\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	// Not privileged: the container has the runtime's default
	// capabilities, not all of the host's.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") && strings.Contains(stdout, line) {
			t.Errorf("the pod has every capability the host has (%s): privileged", line)
		}
	}
	// An exec's exit status comes back, as the cells' verifiers need.
	if _, _, err := c.Exec(ctx, "default", pod.Name, "main", "sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("exec of `exit 3`: %v, want exit code 3", err)
	}

	t0 = time.Now()
	if err := pods.Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	// Gone from the API, and its containers from the node's containerd.
	for {
		_, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("pod still there after deletion: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		out, err := c.ctr("tasks", "ls", "-q")
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(out)) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the pod's containers still run after its deletion: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("pod and its containers gone %s after its deletion", time.Since(t0).Round(time.Millisecond))
}

// checkNoNetwork checks that the pod has no network: only lo in
// /sys/class/net, no route but lo's, and every connection out fails: to
// the API server's port on 127.0.0.1 (the pod's own loopback, where
// nothing listens: refused) and to the host's addresses, the service
// range, the outside and nonet's own address (no route: unreachable).
// A listener on the pod's loopback answers, so lo is up and nc works.
func checkNoNetwork(ctx context.Context, t *testing.T, c *Cluster, pod string) {
	t.Helper()
	out, stderr, err := c.Exec(ctx, "default", pod, "main", "sh", "-c",
		`ls /sys/class/net; echo --- route; cat /proc/net/route; echo --- ipv6_route; cat /proc/net/ipv6_route`)
	if err != nil {
		t.Fatalf("exec: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	t.Logf("the pod's network:\n%s", out)
	links, rest, _ := strings.Cut(out, "--- route\n")
	route, route6, _ := strings.Cut(rest, "--- ipv6_route\n")
	if got := strings.Fields(links); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("the pod's network devices: %v, want [lo]", got)
	}
	// /proc/net/route is the main table: its header alone. ipv6_route
	// (every table, no header) may hold lo's local routes only.
	if lines := strings.Split(strings.TrimSpace(route), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "Iface") {
		t.Errorf("the pod has IPv4 routes:\n%s", route)
	}
	for _, line := range strings.Split(strings.TrimSpace(route6), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] != "lo" {
			t.Errorf("the pod has an IPv6 route not through lo: %s", line)
		}
	}

	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	refused := []string{"127.0.0.1 " + u.Port()}
	unreachable := []string{"10.96.0.1 443", "1.1.1.1 443", "169.254.169.254 80", NoNetPodIP + " 80"}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	ipv6 := false
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && !ip.IP.IsLinkLocalUnicast() {
			unreachable = append(unreachable, ip.IP.String()+" "+u.Port())
			ipv6 = ipv6 || ip.IP.To4() == nil
		}
	}
	if ipv6 {
		unreachable = append(unreachable, "2606:4700:4700::1111 443")
	}
	// The listener takes one connection; connecting again until it is up.
	script := `nc -l -p 7777 >/dev/null & for i in $(seq 50); do echo hi | nc 127.0.0.1 7777 2>/dev/null && echo "own lo: connected" && break; sleep 0.2; done`
	for _, to := range append(refused, unreachable...) {
		script += fmt.Sprintf("; echo '== %s'; nc -w 5 %[1]s </dev/null 2>&1 && echo connected", to)
	}
	out, stderr, err = c.Exec(ctx, "default", pod, "main", "sh", "-c", script)
	t.Logf("connections from the pod:\n%s%s", out, stderr)
	own, rest, _ := strings.Cut(out, "== ")
	if !strings.Contains(own, "own lo: connected") {
		t.Errorf("nc to a listener on the pod's own loopback failed: %v", err)
	}
	// What nc said for each address, by address.
	said := map[string]string{}
	for _, sec := range strings.Split("== "+rest, "== ")[1:] {
		to, msg, _ := strings.Cut(sec, "\n")
		said[to] = msg
	}
	for _, want := range []struct {
		tos []string
		err string
	}{{refused, "Connection refused"}, {unreachable, "Network is unreachable"}} {
		for _, to := range want.tos {
			if !strings.Contains(said[to], want.err) || strings.Contains(said[to], "connected") {
				t.Errorf("connecting to %s from the pod: %q, want %s", to, said[to], want.err)
			}
		}
	}
}

// fusePod is a pod with the busybox image that sleeps, and /dev/fuse.
func fusePod(name string) *corev1.Pod {
	never := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sealbench.test": "kubetest"}},
		Spec: corev1.PodSpec{
			NodeName:                      NodeName,
			AutomountServiceAccountToken:  &never,
			EnableServiceLinks:            &never,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", "3600"},
				// /dev/fuse and its device cgroup rule through the
				// device plugin, nothing else of privileged's.
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{FUSEResource: resource.MustParse("1")}},
			}},
		},
	}
}

// waitPod polls the pod until ok says yes, or it failed.
func waitPod(ctx context.Context, c *Cluster, name string, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	for {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(p) {
			return p, nil
		}
		if err == nil && p.Status.Phase == corev1.PodFailed {
			return p, &podError{p}
		}
		if ctx.Err() != nil {
			if err == nil {
				err = &podError{p}
			}
			return p, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type podError struct{ p *corev1.Pod }

func (e *podError) Error() string {
	var b strings.Builder
	b.WriteString("pod " + e.p.Name + " is " + string(e.p.Status.Phase) + ": " + e.p.Status.Message)
	for _, cs := range e.p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			b.WriteString("; " + cs.Name + " waiting: " + w.Reason + " " + w.Message)
		}
		if x := cs.State.Terminated; x != nil {
			b.WriteString("; " + cs.Name + " terminated: " + x.Reason + " " + x.Message)
		}
	}
	for _, cond := range e.p.Status.Conditions {
		b.WriteString("; " + string(cond.Type) + "=" + string(cond.Status) + " " + cond.Message)
	}
	return b.String()
}
