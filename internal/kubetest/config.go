//go:build linux

package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeConfig writes the keys, the token file, the kubeconfigs and the
// kubelet's and containerd's configuration under c.Dir.
func (c *Cluster) writeConfig(apiPort, kubeletPort int, token string) error {
	pki := filepath.Join(c.Dir, "pki")
	// One CA for the cluster: it signs the serving certificate of the API
	// server and etcd (loopback names), and the API server's client
	// certificate, which etcd and the kubelet ask for.
	now := time.Now()
	// Its key is never written: nothing is signed after Start.
	ca, caKey, caPEM, _, err := issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "sealbench-kube-ca"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil, now)
	if err != nil {
		return err
	}
	_, _, servingPEM, servingKeyPEM, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "sealbench-kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}, ca, caKey, now)
	if err != nil {
		return err
	}
	_, _, clientPEM, clientKeyPEM, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "sealbench-kube-apiserver", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey, now)
	if err != nil {
		return err
	}
	// The service-account token signing key pair.
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	saKey, err := x509.MarshalPKCS8PrivateKey(sa)
	if err != nil {
		return err
	}
	// Two tokens: the admin's (the tests') and the kubelet's.
	kubeletToken := randHex(16)
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	files := []struct {
		path string
		data []byte
	}{
		{filepath.Join(pki, "ca.crt"), caPEM},
		{filepath.Join(pki, "serving.crt"), servingPEM},
		{filepath.Join(pki, "serving.key"), servingKeyPEM},
		{filepath.Join(pki, "client.crt"), clientPEM},
		{filepath.Join(pki, "client.key"), clientKeyPEM},
		{filepath.Join(pki, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})},
		{filepath.Join(pki, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKey})},
		{filepath.Join(pki, "tokens.csv"), []byte(fmt.Sprintf("%s,sealbench-admin,sealbench-admin,\"system:masters\"\n"+
			"%s,system:node:%s,system:node:%s,\"system:nodes\"\n", token, kubeletToken, NodeName, NodeName))},
		{c.Kubeconfig, kubeconfig(server, caPEM, "sealbench-admin", token)},
		{filepath.Join(c.Dir, "kubelet.kubeconfig"), kubeconfig(server, caPEM, "kubelet", kubeletToken)},
		{filepath.Join(c.Dir, "kubelet.yaml"), []byte(c.kubeletConfig(kubeletPort))},
		{filepath.Join(c.Dir, "containerd.toml"), []byte(c.containerdConfig())},
		{filepath.Join(c.Dir, "runsc.toml"), []byte(c.runscConfig())},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// issue makes a key and a certificate from tmpl, valid for a week, signed
// by parent (self-signed when nil), and returns both, parsed and as PEM.
func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, now.Add(-time.Hour), now.Add(7*24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func kubeconfig(server string, ca []byte, user, token string) []byte {
	// JSON is YAML: no YAML library needed, and every string quoted.
	return fmt.Appendf(nil, `{"apiVersion": "v1", "kind": "Config",
 "clusters": [{"name": "sealbench", "cluster": {"server": %q, "certificate-authority-data": %q}}],
 "users": [{"name": %q, "user": {"token": %q}}],
 "contexts": [{"name": "sealbench", "context": {"cluster": "sealbench", "user": %q}}],
 "current-context": "sealbench"}
`, server, b64(ca), user, token, user)
}

// kubeletConfig is the kubelet's KubeletConfiguration: cgroupfs under the
// cluster's own cgroup root on cgroup v1, swap allowed, the private
// containerd, loopback only, its API open to the API server's client
// certificate (any client the cluster's CA signed), and no eviction or image garbage collection that
// a busy test machine's disk could set off.
func (c *Cluster) kubeletConfig(port int) string {
	return fmt.Sprintf(`{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
 "cgroupDriver": "cgroupfs", "cgroupRoot": %q, "failCgroupV1": false, "failSwapOn": false,
 "containerRuntimeEndpoint": %q,
 "address": "127.0.0.1", "port": %d, "readOnlyPort": 0, "healthzPort": 0,
 "authentication": {"x509": {"clientCAFile": %q}, "anonymous": {"enabled": false}, "webhook": {"enabled": false}},
 "authorization": {"mode": "AlwaysAllow"},
 "podLogsDir": %q,
 "resolvConf": "",
 "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%%", "imagefs.available": "1%%"},
 "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
 "nodeStatusUpdateFrequency": "2s", "syncFrequency": "5s", "fileCheckFrequency": "5s"}
`, c.CgroupRoot, "unix://"+c.ContainerdSocket, port, filepath.Join(c.Dir, "pki", "ca.crt"), filepath.Join(c.Dir, "pod-logs"))
}

// containerdConfig is containerd's configuration (version 2, containerd
// 1.6): its own root, state, socket and plugin directories, the CRI plugin
// with runc under cgroupfs, PauseImage as every sandbox's image, and
// restrict_oom_score_adj, since root here lacks CAP_SYS_RESOURCE and a
// sandbox's oom_score_adj of -998 would otherwise fail ("can't get final
// child's PID from pipe").
func (c *Cluster) containerdConfig() string {
	d := filepath.Join(c.Dir, "containerd")
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return strings.Join([]string{
		`version = 2`,
		`root = ` + q(filepath.Join(d, "root")),
		`state = ` + q(filepath.Join(d, "state")),
		`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]`,
		`[grpc]`,
		`  address = ` + q(c.ContainerdSocket),
		`[ttrpc]`,
		`  address = ""`,
		`[debug]`,
		`  address = ""`,
		`[metrics]`,
		`  address = ""`,
		`[plugins."io.containerd.internal.v1.opt"]`,
		`  path = ` + q(filepath.Join(d, "opt")),
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  sandbox_image = ` + q(PauseImage),
		`  restrict_oom_score_adj = true`,
		// The pods' network namespaces mounted under its state directory,
		// not /run/netns, so that Stop's unmounting of what is under the
		// cluster's directory finds those a dead cluster left.
		`  netns_mounts_under_state_dir = true`,
		`  stream_server_address = "127.0.0.1"`,
		`  stream_server_port = "0"`,
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		`        SystemdCgroup = false`,
		// runc's state, which the shim otherwise keeps in /run/containerd/runc.
		`        Root = ` + q(filepath.Join(d, "runc")),
		// gVisor, for the RuntimeClass gvisor: containerd's runsc shim
		// (found on containerd's PATH), which reads runsc.toml.
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.` + GVisorHandler + `]`,
		`      runtime_type = "io.containerd.runsc.v1"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.` + GVisorHandler + `.options]`,
		`        TypeUrl = "io.containerd.runsc.v1.options"`,
		`        ConfigPath = ` + q(filepath.Join(c.Dir, "runsc.toml")),
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		`    bin_dir = ` + q(filepath.Join(c.Dir, "cni", "bin")),
		`    conf_dir = ` + q(filepath.Join(c.Dir, "cni", "conf")),
		``,
	}, "\n")
}

// runscConfig is the runsc shim's configuration: the runsc `make
// kube-tools` built, its state under the cluster's directory, and the
// flags the gvisor target's dockerd gives runsc (scripts/dockerd):
// systrap (no KVM), no network (a pod's is none anyway: nonet), and the
// container's seccomp profile applied inside the sandbox.
func (c *Cluster) runscConfig() string {
	return fmt.Sprintf(`binary_name = %q
root = %q
[runsc_config]
  platform = "systrap"
  network = "none"
  oci-seccomp = "true"
`, c.tools.Runsc, filepath.Join(c.Dir, "containerd", "runsc"))
}
