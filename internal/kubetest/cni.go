//go:build linux

package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// The pods' network: containerd's CRI runs a pod sandbox that does not use
// the host's network only through CNI (and keeps the node NotReady without
// a configuration), so the cluster gives it one whose plugin, nonet (a
// test-only plugin of ours, built at Start), leaves the pod's network
// namespace with the loopback device alone: the standard loopback plugin,
// which containerd runs for every sandbox, brings it up. A pod without
// hostNetwork reaches nothing outside itself.
const (
	nonetPackage = "github.com/sealbench/sealbench/internal/kubetest/nonet"
	nonetPlugin  = "sealbench-nonet"
	// NoNetPodIP is what a pod's status shows as its IP: nonet's
	// link-local address, which exists nowhere (no interface has it).
	NoNetPodIP = "169.254.77.77"
	// loopbackPlugin is where Debian's containernetworking-plugins puts
	// the standard loopback plugin.
	loopbackPlugin = "/usr/lib/cni/loopback"
)

// setUpCNI fills the directories containerd's configuration names for
// CNI: nonet built into cni/bin, beside a link to Debian's loopback
// plugin, and the network list naming nonet in cni/conf.
func (c *Cluster) setUpCNI(ctx context.Context) error {
	bin := filepath.Join(c.Dir, "cni", "bin")
	cmd := exec.CommandContext(ctx, c.tools.Go, "build", "-trimpath", "-o", filepath.Join(bin, nonetPlugin), nonetPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	// In the module, wherever the test binary runs (this file's directory,
	// when the binary was built here, or else the working directory).
	if _, file, _, ok := runtime.Caller(0); ok {
		if _, err := os.Stat(filepath.Dir(file)); err == nil {
			cmd.Dir = filepath.Dir(file)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the CNI plugin %s: %v: %s", nonetPackage, err, out)
	}
	if err := os.Symlink(c.tools.Loopback, filepath.Join(bin, "loopback")); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [{"type": %q}]}`+"\n", nonetPlugin, nonetPlugin)
	return os.WriteFile(filepath.Join(c.Dir, "cni", "conf", "10-"+nonetPlugin+".conflist"), []byte(conf), 0o600)
}
