package kubeengine

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
)

func TestPodSpecOfASandbox(t *testing.T) {
	s := &Server{c: Config{Namespace: "ns", Node: "n1", FUSEResource: "sealbench.dev/fuse", RunID: "run1", SeccompDir: "/x"}}
	img := manifests.DigestOf([]byte("image"))
	cfg, hc := engine.SandboxConfig("run1", img, []string{"sleep", "infinity"}, manifests.EngineDockerd, "", false)
	cfg.Labels["not a label key!"] = "v"
	rec := containerRecord{ID: strings.Repeat("ab", 32), Name: "sealbench-run1-probe", Config: cfg, HostConfig: hc}
	pod, err := s.podSpec(rec)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case pod.Name != "sealbench-run1-probe" || pod.Namespace != "ns" || pod.Spec.NodeName != "n1":
		t.Errorf("pod %s/%s on %q", pod.Namespace, pod.Name, pod.Spec.NodeName)
	case pod.Spec.RestartPolicy != corev1.RestartPolicyNever || *pod.Spec.AutomountServiceAccountToken || *pod.Spec.EnableServiceLinks || pod.Spec.HostNetwork:
		t.Errorf("pod spec %+v", pod.Spec)
	case c.Image != img.String() || c.ImagePullPolicy != corev1.PullNever || len(c.Command) != 0 || strings.Join(c.Args, " ") != "sleep infinity":
		t.Errorf("container %s (%s) command %v args %v", c.Image, c.ImagePullPolicy, c.Command, c.Args)
	case c.Resources.Limits.Name("sealbench.dev/fuse", "").Value() != 1:
		t.Errorf("limits %v, want one sealbench.dev/fuse", c.Resources.Limits)
	case sc.Capabilities == nil || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "SYS_ADMIN" || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("security context %+v", sc)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || *sc.SeccompProfile.LocalhostProfile != seccompName(engine.DockerSeccompProfile(false)):
		t.Errorf("seccomp %+v, want the dockerd profile as a Localhost one", sc.SeccompProfile)
	case pod.Labels[manifests.RunLabel] != "run1" || pod.Labels[LabelID] != rec.ID[:32] || len(pod.Labels) != 2:
		t.Errorf("labels %v: want the run's and the id's, and no invalid one", pod.Labels)
	}
	back, ok := recordOf(pod)
	if !ok || back.ID != rec.ID || back.Name != rec.Name || back.Config.Labels["not a label key!"] != "v" || back.HostConfig.CapAdd[0] != "SYS_ADMIN" {
		t.Errorf("the annotation gives back %+v", back)
	}
}

func TestPodSpecRefusesWhatNoPodCanBe(t *testing.T) {
	s := &Server{c: Config{Namespace: "ns", Node: "n1", FUSEResource: "f", RunID: "r", RuntimeClass: "gvisor"}}
	cfg := &container.Config{Image: "busybox", User: "nobody", Tty: true}
	hc := &container.HostConfig{NetworkMode: "host", Runtime: "runc", Binds: []string{"/:/host"},
		Resources:   container.Resources{Devices: []container.DeviceMapping{{PathOnHost: "/dev/kvm"}}},
		SecurityOpt: []string{"seccomp=" + engine.DockerSeccompProfile(false), "apparmor=unconfined"}}
	_, err := s.podSpec(containerRecord{ID: strings.Repeat("0", 64), Name: "x", Config: cfg, HostConfig: hc})
	if !errors.Is(err, errBadInput) {
		t.Fatalf("podSpec: %v, want a bad input", err)
	}
	for _, want := range []string{"TTY", `"host"`, `runtime "runc"`, `"gvisor"`, "binds", "/dev/kvm", "--seccomp-dir", "apparmor", `user "nobody"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %s", err, want)
		}
	}
}
