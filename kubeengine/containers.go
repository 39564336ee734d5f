package kubeengine

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/manifests"
)

// What a pod made by kube-engine carries.
const (
	// AnnotationContainer holds the container's create request and id
	// (containerRecord as JSON): the pod is the state.
	AnnotationContainer = "sealbench.dev/engine-container"
	// LabelID holds the first 32 characters of the container's id, so
	// that a lookup by id lists only kube-engine's pods.
	LabelID = "sealbench.dev/engine-id"
	// LabelTarget holds the name of the run's target whose kube-engine
	// made the pod (Config.Target): a run may have a target per node, or
	// per RuntimeClass, in one namespace.
	LabelTarget = "sealbench.dev/target"
	// containerName is the pod's one container.
	containerName = "sandbox"
)

// containerRecord is a container as created: what the pod's annotation
// holds.
type containerRecord struct {
	ID         string
	Name       string
	Created    time.Time
	Config     *container.Config
	HostConfig *container.HostConfig
}

// containerRec is a container this Server knows: created here (pod nil
// until start), or found in the cluster.
type containerRec struct {
	containerRecord
	starting bool
	started  bool   // a pod was created for it
	release  func() // stops renewing the node's Lease and releases it
	// claimed: the container is a SandboxClaim on the run's warm pool
	// (Config.WarmPool), named PodName(Name); its pod is pod, the one the
	// claim's Sandbox runs.
	claimed bool
	pod     string
}

// podName is the container's pod: the claimed Sandbox's, else the one
// named after the container.
func (c *containerRec) podName() string {
	if c.claimed {
		return c.pod
	}
	return PodName(c.Name)
}

var validName = regexp.MustCompile(`^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func randomID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ContainerCreate keeps the create request in memory, once a pod could
// be made of it and none has the name: the pod is made at start.
func (s *Server) ContainerCreate(ctx context.Context, name string, body io.Reader) (any, error) {
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		return nil, fmt.Errorf("%w: kube-engine needs a container name (?name=): the pod is named after it", errBadInput)
	}
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("%w: Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed", errBadInput, name)
	}
	var req container.CreateRequest
	if err := engineapi.DecodeJSON(body, &req); err != nil {
		return nil, fmt.Errorf("decoding the container config: %w", err)
	}
	if req.Config == nil || req.Config.Image == "" {
		return nil, fmt.Errorf("%w: No image specified", errBadInput)
	}
	if req.HostConfig == nil {
		req.HostConfig = &container.HostConfig{}
	}
	rec := containerRecord{ID: randomID(), Name: name, Created: time.Now().UTC(), Config: req.Config, HostConfig: req.HostConfig}
	if _, err := s.podSpec(rec); err != nil {
		return nil, err
	}
	s.mu.Lock()
	for _, c := range s.containers {
		if c.Name == name {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: Conflict. The container name \"/%s\" is already in use by container %q", errConflict, name, c.ID)
		}
	}
	// Held until the pod check below is done: a second create of the
	// same name sees this one.
	c := &containerRec{containerRecord: rec}
	s.containers[rec.ID] = c
	s.mu.Unlock()
	if s.c.WarmPool > 0 {
		if _, _, ok, err := s.claimed(ctx, name); err != nil || ok {
			s.forget(rec.ID)
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: Conflict. The container name \"/%s\" is already in use: SandboxClaim %s/%s exists", errConflict, name, s.c.Namespace, PodName(name))
		}
	}
	if _, err := s.client.CoreV1().Pods(s.c.Namespace).Get(ctx, PodName(name), metav1.GetOptions{}); err == nil {
		s.forget(rec.ID)
		return nil, fmt.Errorf("%w: Conflict. The container name \"/%s\" is already in use: pod %s/%s exists", errConflict, name, s.c.Namespace, PodName(name))
	} else if !apierrors.IsNotFound(err) {
		s.forget(rec.ID)
		return nil, fmt.Errorf("looking for pod %s: %w", PodName(name), err)
	}
	return container.CreateResponse{ID: rec.ID, Warnings: []string{}}, nil
}

func (s *Server) forget(id string) {
	s.mu.Lock()
	delete(s.containers, id)
	for k, e := range s.execs {
		if e.c.ID == id {
			delete(s.execs, k)
		}
	}
	s.mu.Unlock()
}

// podSpec maps a container to its pod, refusing what cannot be mapped.
func (s *Server) podSpec(rec containerRecord) (*corev1.Pod, error) {
	cfg, hc := rec.Config, rec.HostConfig
	var bad []string
	refuse := func(cond bool, what string) {
		if cond {
			bad = append(bad, what)
		}
	}
	refuse(cfg.Tty || cfg.OpenStdin || cfg.AttachStdin, "a TTY or an open stdin")
	refuse(len(cfg.ExposedPorts) > 0 || len(hc.PortBindings) > 0 || hc.PublishAllPorts, "ports")
	refuse(len(cfg.Volumes) > 0 || len(hc.Binds) > 0 || len(hc.Mounts) > 0 || len(hc.VolumesFrom) > 0 || len(hc.Tmpfs) > 0, "volumes, binds, mounts or tmpfs")
	refuse(cfg.Hostname != "" || cfg.Domainname != "", "a hostname")
	refuse(cfg.Healthcheck != nil, "a healthcheck")
	refuse(hc.AutoRemove, "AutoRemove")
	refuse(len(hc.Links) > 0 || len(hc.ExtraHosts) > 0 || len(hc.DNS) > 0, "links, extra hosts or DNS")
	refuse(string(hc.PidMode) != "" || string(hc.IpcMode) != "" && hc.IpcMode != "private" && hc.IpcMode != "shareable" ||
		string(hc.UTSMode) != "" || string(hc.UsernsMode) != "", "a pid, ipc, uts or user namespace mode")
	refuse(len(hc.Sysctls) > 0 || len(hc.DeviceRequests) > 0 || len(hc.DeviceCgroupRules) > 0, "sysctls, device requests or device cgroup rules")
	switch hc.NetworkMode {
	case "", "default", "none":
	default:
		bad = append(bad, fmt.Sprintf("network mode %q (only none)", hc.NetworkMode))
	}
	limits := corev1.ResourceList{}
	for _, d := range hc.Devices {
		if d.PathOnHost != "/dev/fuse" || (d.PathInContainer != "" && d.PathInContainer != "/dev/fuse") {
			bad = append(bad, fmt.Sprintf("device %s (only /dev/fuse, from %s)", d.PathOnHost, s.c.FUSEResource))
			continue
		}
		limits[corev1.ResourceName(s.c.FUSEResource)] = resource.MustParse("1")
	}
	if hc.Memory > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(hc.Memory, resource.BinarySI)
	}
	if hc.NanoCPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(hc.NanoCPUs/1e6, resource.DecimalSI)
	}
	sc := &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if hc.Privileged {
		sc.Privileged = ptr(true)
		sc.SeccompProfile = nil
	}
	if hc.ReadonlyRootfs {
		sc.ReadOnlyRootFilesystem = ptr(true)
	}
	if len(hc.CapAdd) > 0 || len(hc.CapDrop) > 0 {
		sc.Capabilities = &corev1.Capabilities{}
		for _, c := range hc.CapAdd {
			sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
		}
		for _, c := range hc.CapDrop {
			sc.Capabilities.Drop = append(sc.Capabilities.Drop, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
		}
	}
	for _, o := range hc.SecurityOpt {
		profile, isSeccomp := strings.CutPrefix(o, "seccomp=")
		switch {
		case o == "no-new-privileges" || o == "no-new-privileges:true" || o == "no-new-privileges=true":
			sc.AllowPrivilegeEscalation = ptr(false)
		case isSeccomp && profile == "unconfined":
			sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		case isSeccomp && s.c.SeccompDir != "" && json.Valid([]byte(profile)):
			sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(seccompName(profile))}
		case isSeccomp && s.c.SeccompDir != "":
			bad = append(bad, fmt.Sprintf("security option %q (a seccomp profile is its JSON, or unconfined)", clip(o, 40)))
		case isSeccomp:
			bad = append(bad, "a seccomp profile: this kube-engine reaches no seccomp directory of the node's kubelet (--seccomp-dir); pods get RuntimeDefault")
		default:
			bad = append(bad, fmt.Sprintf("security option %q (only no-new-privileges, and seccomp=)", clip(o, 40)))
		}
	}
	if cfg.User != "" {
		u, g, ok := numericUser(cfg.User)
		if !ok {
			bad = append(bad, fmt.Sprintf("user %q (a pod takes a numeric UID[:GID])", cfg.User))
		} else {
			sc.RunAsUser = &u
			if g >= 0 {
				sc.RunAsGroup = &g
			}
		}
	}
	if hc.Runtime != "" && hc.Runtime != s.c.RuntimeClass {
		want := fmt.Sprintf("the RuntimeClass %q", s.c.RuntimeClass)
		if s.c.RuntimeClass == "" {
			want = "none: this kube-engine uses the cluster's default"
		}
		bad = append(bad, fmt.Sprintf("runtime %q (%s)", hc.Runtime, want))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: kube-engine cannot map to a pod: %s", errBadInput, strings.Join(bad, "; "))
	}
	var env []corev1.EnvVar
	for _, e := range cfg.Env {
		k, v, _ := strings.Cut(e, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range cfg.Labels {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		}
	}
	labels[manifests.RunLabel] = s.c.RunID
	labels[LabelID] = rec.ID[:32]
	if s.c.Target != "" {
		labels[LabelTarget] = s.c.Target
	}
	image, pull := cfg.Image, corev1.PullIfNotPresent
	if p := s.pulledImage(cfg.Image); p != nil {
		// Pulled through this kube-engine: the node pulls the manifest
		// checked, unless it has it.
		image = p.Ref.String()
	} else if strings.HasPrefix(cfg.Image, "sha256:") {
		pull = corev1.PullNever
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName(rec.Name), Namespace: s.c.Namespace, Labels: labels,
			Annotations: map[string]string{AnnotationContainer: string(body)}},
		Spec: corev1.PodSpec{
			NodeName: s.c.Node, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr(false), EnableServiceLinks: ptr(false),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{
				Name: containerName, Image: image, ImagePullPolicy: pull,
				Command: cfg.Entrypoint, Args: cfg.Cmd, Env: env, WorkingDir: cfg.WorkingDir,
				SecurityContext: sc, Resources: corev1.ResourceRequirements{Limits: limits},
			}},
		},
	}
	if s.c.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = ptr(s.c.RuntimeClass)
	}
	return pod, nil
}

func ptr[T any](v T) *T { return &v }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// numericUser parses UID[:GID]; gid is -1 when not given.
func numericUser(u string) (uid, gid int64, ok bool) {
	us, gs, hasG := strings.Cut(u, ":")
	uid, err := strconv.ParseInt(us, 10, 64)
	if err != nil || uid < 0 {
		return 0, 0, false
	}
	gid = -1
	if hasG {
		if gid, err = strconv.ParseInt(gs, 10, 64); err != nil || gid < 0 {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// lookup finds a container by id, unique id prefix or name: in memory,
// then among the pods kube-engine made. pod is nil when no pod exists.
func (s *Server) lookup(ctx context.Context, ref string) (*containerRec, *corev1.Pod, error) {
	ref = strings.TrimPrefix(ref, "/")
	notFound := fmt.Errorf("%w: No such container: %s", errNotFound, ref)
	if ref == "" {
		return nil, nil, notFound
	}
	s.mu.Lock()
	var c *containerRec
	for _, x := range s.containers {
		if x.ID == ref || x.Name == ref || len(ref) >= 12 && strings.HasPrefix(x.ID, ref) {
			c = x
			break
		}
	}
	s.mu.Unlock()
	pods := s.client.CoreV1().Pods(s.c.Namespace)
	if c != nil {
		s.mu.Lock()
		started, name := c.started, c.podName()
		s.mu.Unlock()
		if !started || name == "" {
			return c, nil, nil
		}
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Removed by another kube-engine, or a teardown through the API.
			if release := s.takeRelease(c); release != nil {
				release()
			}
			s.forget(c.ID)
			return nil, nil, notFound
		}
		if err != nil {
			return nil, nil, fmt.Errorf("getting pod %s: %w", name, err)
		}
		return c, pod, nil
	}
	// Only the cluster knows it: by name, then by id.
	if validName.MatchString(ref) {
		pod, err := pods.Get(ctx, PodName(ref), metav1.GetOptions{})
		if err == nil {
			if rec, ok := recordOf(pod); ok && rec.Name == ref {
				return s.adopt(rec), pod, nil
			}
		} else if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("getting pod %s: %w", PodName(ref), err)
		}
		if s.c.WarmPool > 0 {
			if c, pod, err := s.lookupClaim(ctx, ref); err != nil || c != nil {
				return c, pod, err
			}
		}
	}
	if len(ref) < 12 {
		return nil, nil, notFound
	}
	sel := LabelID
	if len(ref) >= 32 {
		sel = LabelID + "=" + ref[:32]
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("listing kube-engine's pods in %s: %w", s.c.Namespace, err)
	}
	for i := range list.Items {
		if rec, ok := recordOf(&list.Items[i]); ok && strings.HasPrefix(rec.ID, ref) {
			return s.adopt(rec), &list.Items[i], nil
		}
	}
	if s.c.WarmPool > 0 {
		claims, err := s.dynamic.Resource(SandboxClaimResource).Namespace(s.c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, nil, fmt.Errorf("listing kube-engine's SandboxClaims in %s: %w", s.c.Namespace, err)
		}
		for _, cl := range claims.Items {
			if rec, ok := recordIn(cl.GetAnnotations()); ok && strings.HasPrefix(rec.ID, ref) {
				if c, pod, err := s.lookupClaim(ctx, rec.Name); err != nil || c != nil {
					return c, pod, err
				}
			}
		}
	}
	return nil, nil, notFound
}

// recordOf reads a pod's container record from its annotation.
func recordOf(pod *corev1.Pod) (containerRecord, bool) { return recordIn(pod.Annotations) }

// recordIn reads a container record from annotations (a pod's, or a
// SandboxClaim's).
func recordIn(annotations map[string]string) (containerRecord, bool) {
	var rec containerRecord
	b, ok := annotations[AnnotationContainer]
	if !ok || json.Unmarshal([]byte(b), &rec) != nil || rec.ID == "" || rec.Config == nil {
		return rec, false
	}
	if rec.HostConfig == nil {
		rec.HostConfig = &container.HostConfig{}
	}
	return rec, true
}

// lookupClaim finds the container ref names by its SandboxClaim on the
// run's warm pool (Config.WarmPool), and keeps it, as started.
// It answers nil, nil, nil when there is no such claim.
func (s *Server) lookupClaim(ctx context.Context, ref string) (*containerRec, *corev1.Pod, error) {
	rec, podName, ok, err := s.claimed(ctx, ref)
	if err != nil || !ok {
		return nil, nil, err
	}
	c := s.adopt(rec)
	s.mu.Lock()
	c.claimed, c.pod = true, podName
	s.mu.Unlock()
	if podName == "" {
		return c, nil, nil
	}
	pod, err := s.client.CoreV1().Pods(s.c.Namespace).Get(ctx, podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return c, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("getting pod %s: %w", podName, err)
	}
	return c, pod, nil
}

// adopt keeps a container found in the cluster, as started.
func (s *Server) adopt(rec containerRecord) *containerRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.containers[rec.ID]; ok {
		return c
	}
	c := &containerRec{containerRecord: rec, started: true}
	s.containers[rec.ID] = c
	return c
}

// sandboxStatus is the pod's container's status, nil before it has one.
func sandboxStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// ContainerStart takes the node's Lease, creates the pod and waits until
// its container has started. A container started already answers 204,
// as kube-engine always has (dockerd answers 304; clients take both).
func (s *Server) ContainerStart(ctx context.Context, ref string) (bool, error) {
	return true, s.startContainer(ctx, ref)
}

func (s *Server) startContainer(ctx context.Context, ref string) error {
	c, pod, err := s.lookup(ctx, ref)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if c.started || c.starting {
		s.mu.Unlock()
		if pod != nil && pod.DeletionTimestamp == nil && (pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending) {
			return nil // already started
		}
		return fmt.Errorf("%w: container %s has already run: kube-engine starts a container once", errConflict, c.Name)
	}
	c.starting = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.starting = false
		s.mu.Unlock()
	}()
	spec, err := s.podSpec(c.containerRecord)
	if err != nil {
		return err
	}
	if p := spec.Spec.Containers[0].SecurityContext.SeccompProfile; p != nil && p.Type == corev1.SeccompProfileTypeLocalhost {
		if err := s.writeSeccomp(c.HostConfig.SecurityOpt); err != nil {
			return err
		}
	}
	release, err := s.holdNode(ctx)
	if err != nil {
		return err
	}
	created, sandbox := spec, spec.Name
	warm := false
	if s.c.WarmPool > 0 {
		warm, err = s.ensurePool(ctx, spec)
	}
	switch {
	case err != nil:
	case warm:
		// A claim on the run's warm pool: its Sandbox, adopted or cold,
		// runs the pod.
		s.mu.Lock()
		c.claimed = true
		s.mu.Unlock()
		var pod string
		if sandbox, pod, err = s.claim(ctx, spec); err == nil {
			created = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: s.c.Namespace}}
			s.mu.Lock()
			c.pod = pod
			s.mu.Unlock()
		}
	case s.c.AgentSandbox:
		// The Sandbox's controller makes the pod.
		err = s.createSandbox(ctx, spec)
	default:
		created, err = s.client.CoreV1().Pods(s.c.Namespace).Create(ctx, spec, metav1.CreateOptions{})
	}
	if err != nil {
		if warm {
			err = errors.Join(err, s.deleteContainer(context.WithoutCancel(ctx), c))
		}
		release()
		if !s.c.AgentSandbox {
			err = fmt.Errorf("creating pod %s on node %s: %w", spec.Name, s.c.Node, err)
		}
		return err
	}
	s.mu.Lock()
	c.started, c.release = true, release
	s.mu.Unlock()
	if err := s.waitStarted(ctx, created, sandbox, c.Config.Image); err != nil {
		rmErr := s.deleteContainer(context.WithoutCancel(ctx), c)
		if release := s.takeRelease(c); release != nil {
			release()
		}
		return errors.Join(fmt.Errorf("starting container %s (pod %s/%s): %w", c.Name, s.c.Namespace, spec.Name, err), rmErr)
	}
	return nil
}

// seccompName is the file, in the kubelet's seccomp directory, that holds
// profile: named by its digest, so that a file once written never changes.
func seccompName(profile string) string {
	sum := sha256.Sum256([]byte(profile))
	return "sealbench-" + hex.EncodeToString(sum[:16]) + ".json"
}

// writeSeccomp writes the seccomp= profile among opts into the kubelet's
// seccomp directory, where the pod's Localhost profile names it.
func (s *Server) writeSeccomp(opts []string) error {
	for _, o := range opts {
		profile, ok := strings.CutPrefix(o, "seccomp=")
		if !ok || profile == "unconfined" {
			continue
		}
		p := filepath.Join(s.c.SeccompDir, seccompName(profile))
		if b, err := os.ReadFile(p); err == nil && string(b) == profile {
			continue
		}
		if err := os.MkdirAll(s.c.SeccompDir, 0o755); err != nil {
			return fmt.Errorf("creating the kubelet's seccomp directory: %w", err)
		}
		if err := atomicfile.WriteFile(p, []byte(profile), 0o644); err != nil {
			return fmt.Errorf("writing the seccomp profile %s: %w", p, err)
		}
	}
	return nil
}

// takeRelease takes the function that releases c's Lease: nil when this
// Server holds none for c.
func (s *Server) takeRelease(c *containerRec) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	release := c.release
	c.release = nil
	return release
}

// StartLimit is how long start waits for a pod to run, unless
// Config.StartTimeout says otherwise.
const StartLimit = 2 * time.Minute

// Container states in which a pod will never run.
var failedWaiting = []string{"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
	"CreateContainerError", "CreateContainerConfigError", "RunContainerError", "CrashLoopBackOff", "ImageInspectError"}

// waitStarted waits until the pod's container has started (running or
// already ended), and checks that it runs the image asked for; with
// Config.AgentSandbox, until the Sandbox sandbox that runs it is Ready.
// When it never does, the error says why in the cluster's words
// (WhyNotRunning).
func (s *Server) waitStarted(ctx context.Context, pod *corev1.Pod, sandbox, image string) error {
	limit := cmp.Or(s.c.StartTimeout, StartLimit)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pods := s.client.CoreV1().Pods(s.c.Namespace)
	why := func() string {
		w := WhyNotRunning(context.WithoutCancel(ctx), s.client, pod)
		if s.c.AgentSandbox {
			w = s.sandboxWhy(context.WithoutCancel(ctx), sandbox) + "; " + w
		}
		return w
	}
	for {
		cs := sandboxStatus(pod)
		switch {
		case cs != nil && cs.State.Waiting != nil && slices.Contains(failedWaiting, cs.State.Waiting.Reason):
			return fmt.Errorf("%s: %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message, why())
		case cs != nil && cs.State.Terminated != nil && cs.State.Terminated.StartedAt.IsZero():
			t := cs.State.Terminated
			return fmt.Errorf("%s (exit %d): %s: %s", t.Reason, t.ExitCode, t.Message, why())
		case cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil):
			if err := s.checkImage(ctx, cs.ImageID, image); err != nil || !s.c.AgentSandbox {
				return err
			}
			if err := s.waitSandboxReady(ctx, sandbox); err != nil {
				return fmt.Errorf("%w: %s", err, why())
			}
			return nil
		case pod.Status.Phase == corev1.PodFailed:
			return fmt.Errorf("the pod failed: %s", why())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pod did not run within %s: %s", limit, why())
		case <-time.After(200 * time.Millisecond):
		}
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if s.c.AgentSandbox && apierrors.IsNotFound(err) {
			continue // the Sandbox's controller has not made it yet
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("getting pod %s: %w", pod.Name, err)
		}
		if err == nil {
			pod = p
		}
	}
}

// checkImage checks that the container runs the image asked for: for an
// image pulled through this kube-engine, the manifest it pinned
// (runsPulled); otherwise the runtime's image ID (or, for a repo digest,
// the image it names) is the image id asked for, or that of the reference
// asked for.
func (s *Server) checkImage(ctx context.Context, got, want string) error {
	if p := s.pulledImage(want); p != nil {
		return s.runsPulled(ctx, got, p)
	}
	if got == want {
		return nil
	}
	if s.c.Containerd == "" {
		if strings.HasPrefix(want, "sha256:") && !strings.HasSuffix(got, want) {
			return fmt.Errorf("the container runs image %s, not %s", got, want)
		}
		return nil
	}
	gotID, err := s.imageID(ctx, got)
	if err != nil {
		return fmt.Errorf("checking the container's image %s: %w", got, err)
	}
	wantID, err := s.imageID(ctx, want)
	if err != nil {
		return fmt.Errorf("checking the container's image against %s: %w", want, err)
	}
	if gotID != wantID {
		return fmt.Errorf("the container runs image %s, not %s (%s)", gotID, want, wantID)
	}
	return nil
}

// deleteContainer deletes a container's pod at once and waits until it
// is gone; with Config.AgentSandbox, its Sandbox first (DeleteSandbox);
// a claimed container's SandboxClaim before that (DeleteClaim).
func (s *Server) deleteContainer(ctx context.Context, c *containerRec) error {
	s.mu.Lock()
	claimed := c.claimed
	s.mu.Unlock()
	switch {
	case claimed:
		return DeleteClaim(ctx, s.dynamic, s.deleteBarePod, s.c.Namespace, PodName(c.Name))
	case s.c.AgentSandbox:
		return DeleteSandbox(ctx, s.dynamic, s.deleteBarePod, s.c.Namespace, PodName(c.Name))
	}
	return s.deleteBarePod(ctx, PodName(c.Name))
}

// deleteBarePod deletes a pod at once and waits until it is gone.
func (s *Server) deleteBarePod(ctx context.Context, name string) error {
	pods := s.client.CoreV1().Pods(s.c.Namespace)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting pod %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s is still there a minute after its deletion", name)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ContainerDelete deletes the container's pod, waits until it is gone,
// and releases the node's Lease with the run's last pod.
func (s *Server) ContainerDelete(ctx context.Context, ref string, force bool) error {
	c, pod, err := s.lookup(ctx, ref)
	if err != nil {
		return err
	}
	if cs := sandboxStatus(pod); !force && cs != nil && cs.State.Running != nil {
		return fmt.Errorf("%w: cannot remove container %q: container is running: stop the container before removing or force remove", errConflict, c.Name)
	}
	s.mu.Lock()
	claimed := c.claimed
	s.mu.Unlock()
	var errs []error
	if pod != nil || claimed {
		errs = append(errs, s.deleteContainer(ctx, c))
	}
	if release := s.takeRelease(c); release != nil {
		release()
	} else if len(errs) == 0 || errs[0] == nil {
		// Another kube-engine of the run started it (this one is a
		// teardown's): with the run's last pod gone, the run's Lease goes.
		errs = append(errs, s.releaseIfLast(context.WithoutCancel(ctx)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.forget(c.ID)
	return nil
}

// ContainerInspect is the container as its pod's status says.
func (s *Server) ContainerInspect(ctx context.Context, ref string) (any, error) {
	c, pod, err := s.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	st := &container.State{Status: container.StateCreated, StartedAt: "0001-01-01T00:00:00Z", FinishedAt: "0001-01-01T00:00:00Z"}
	s.mu.Lock()
	started := c.started
	s.mu.Unlock()
	if cs := sandboxStatus(pod); cs != nil {
		switch {
		case cs.State.Running != nil:
			st.Status, st.Running = container.StateRunning, true
			st.StartedAt = cs.State.Running.StartedAt.UTC().Format(time.RFC3339Nano)
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			st.Status, st.ExitCode = container.StateExited, int(t.ExitCode)
			st.StartedAt, st.FinishedAt = t.StartedAt.UTC().Format(time.RFC3339Nano), t.FinishedAt.UTC().Format(time.RFC3339Nano)
			if t.Reason == "OOMKilled" {
				st.OOMKilled = true
			}
		}
		if pod.DeletionTimestamp != nil {
			st.Status = container.StateRemoving
		}
	} else if started && pod == nil {
		st.Status, st.Dead = container.StateDead, true
	}
	base := &container.ContainerJSONBase{
		ID: c.ID, Created: c.Created.Format(time.RFC3339Nano), Name: "/" + c.Name, Image: c.Config.Image,
		State: st, HostConfig: c.HostConfig, Driver: "kubernetes", Platform: "linux",
	}
	if len(c.Config.Entrypoint) > 0 {
		base.Path, base.Args = c.Config.Entrypoint[0], append(c.Config.Entrypoint[1:len(c.Config.Entrypoint):len(c.Config.Entrypoint)], c.Config.Cmd...)
	} else if len(c.Config.Cmd) > 0 {
		base.Path, base.Args = c.Config.Cmd[0], c.Config.Cmd[1:]
	}
	if pod != nil {
		base.Image = imageIDOf(sandboxStatus(pod), c.Config.Image)
	}
	return container.InspectResponse{ContainerJSONBase: base, Config: c.Config}, nil
}

// imageIDOf is the image a container runs, as its status says when it
// names an image id.
func imageIDOf(cs *corev1.ContainerStatus, asked string) string {
	if cs != nil && strings.HasPrefix(cs.ImageID, "sha256:") {
		return cs.ImageID
	}
	return asked
}

// ContainerWait polls the container's pod until the condition holds.
func (s *Server) ContainerWait(w http.ResponseWriter, r *http.Request, ref string) {
	ctx := r.Context()
	c, _, err := s.lookup(ctx, ref)
	if err != nil {
		engineapi.Fail(w, err)
		return
	}
	cond := container.WaitCondition(r.URL.Query().Get("condition"))
	// dockerd answers the headers at once and the body when the wait ends.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	var resp container.WaitResponse
wait:
	for {
		_, pod, err := s.lookup(ctx, c.ID)
		s.mu.Lock()
		started := c.started
		s.mu.Unlock()
		cs := sandboxStatus(pod)
		switch {
		case errors.Is(err, errNotFound):
			break wait // removed
		case err != nil:
			resp.Error = &container.WaitExitError{Message: err.Error()}
			break wait
		case cond == container.WaitConditionRemoved:
		case pod == nil && (started || cond != container.WaitConditionNextExit):
			break wait // never started, or its pod is gone
		case cs != nil && cs.State.Terminated != nil:
			resp.StatusCode = int64(cs.State.Terminated.ExitCode)
			break wait
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	json.NewEncoder(w).Encode(resp)
}

// ContainerLogs streams the pod's log, as stdout.
func (s *Server) ContainerLogs(w http.ResponseWriter, r *http.Request, ref string) {
	ctx := r.Context()
	q := r.URL.Query()
	stdout, stderr := engineapi.BoolParam(r, "stdout"), engineapi.BoolParam(r, "stderr")
	if !stdout && !stderr {
		engineapi.WriteError(w, http.StatusBadRequest, "Bad parameters: you must choose at least one stream")
		return
	}
	c, pod, err := s.lookup(ctx, ref)
	if err != nil {
		engineapi.Fail(w, err)
		return
	}
	opts := &corev1.PodLogOptions{Container: containerName, Follow: engineapi.BoolParam(r, "follow"), Timestamps: engineapi.BoolParam(r, "timestamps")}
	if t := q.Get("tail"); t != "" && t != "all" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			engineapi.WriteError(w, http.StatusBadRequest, fmt.Sprintf("tail %q is not a number", t))
			return
		}
		opts.TailLines = &n
	}
	var body io.ReadCloser
	cs := sandboxStatus(pod)
	switch {
	case cs == nil || cs.State.Waiting != nil:
	case cs.State.Terminated != nil && !opts.Follow && time.Now().Before(logSettled(cs.State.Terminated.FinishedAt.Time, logSettle)):
		// A container that has just exited may not have all of its
		// output in the kubelet's log yet: containerd reports the exit
		// before its copy of the output is written (seen under load as
		// an empty log of a container that printed). The log is read
		// until it holds still; one that exited earlier streams.
		logs := s.client.CoreV1().Pods(s.c.Namespace).GetLogs(pod.Name, opts)
		b, err := settledLog(ctx, func(ctx context.Context) ([]byte, error) { return logs.DoRaw(ctx) },
			logSettled(cs.State.Terminated.FinishedAt.Time, logSettle), time.Now)
		if err != nil {
			engineapi.Fail(w, fmt.Errorf("reading the logs of pod %s (container %s): %w", pod.Name, c.Name, err))
			return
		}
		body = io.NopCloser(bytes.NewReader(b))
	default:
		body, err = s.client.CoreV1().Pods(s.c.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
		if err != nil {
			engineapi.Fail(w, fmt.Errorf("reading the logs of pod %s (container %s): %w", pod.Name, c.Name, err))
			return
		}
		defer body.Close()
	}
	w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	w.WriteHeader(http.StatusOK)
	if body == nil || !stdout {
		return // Kubernetes keeps one log, which is stdout's and stderr's together: it is given as stdout.
	}
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(engineapi.Frame(1, buf[:n])); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// logSettle bounds how long a just-exited container's log is read again
// until it holds still: its exit plus this, the exit's time being known
// to the second.
const logSettle = 3 * time.Second

// logSettled is when the log of a container that finished at finished
// holds all its output: settle later, plus the second FinishedAt is
// rounded to.
func logSettled(finished time.Time, settle time.Duration) time.Time {
	return finished.Add(settle + time.Second)
}

// settledLog reads a terminated container's log: once when deadline
// (logSettled) has passed, and otherwise again every 200 ms until two
// reads in a row agree and the log is not empty, or until deadline.
func settledLog(ctx context.Context, read func(context.Context) ([]byte, error), deadline time.Time, now func() time.Time) ([]byte, error) {
	b, err := read(ctx)
	for err == nil && now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		var again []byte
		if again, err = read(ctx); err != nil {
			break
		}
		if len(again) > 0 && bytes.Equal(again, b) {
			return again, nil
		}
		b = again
	}
	return b, err
}
