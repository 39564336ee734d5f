//go:build kubetest

package kubernetes_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/kubetest"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/kubernetes"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
)

// chrootImage is the busybox test image with coreutils' chroot, which
// the kube-engine runs an exec as another user with (the Sandbox image
// has it), and cmd as its command, as a `docker save` tar tagged ref.
func chrootImage(t *testing.T, ref string, cmd ...string) engine.Image {
	img := engine.Image{Tar: filepath.Join(t.TempDir(), "image.tar"), Ref: ref}
	f, err := os.Create(img.Tar)
	if err != nil {
		t.Fatal(err)
	}
	img.ID, err = testimage.BusyboxWith(testenv.NeedCommand(t, "busybox"), img.Ref, cmd, []string{testenv.NeedCommand(t, "chroot")}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// bundleRef is how a bundle's Sandbox image is tagged.
const bundleRef = "sealbench/sandbox:build-linux-0123456789ab"

// push pushes the image of a `docker save` tar to ref, as `crane push`
// does: its config bytes kept, so its id is. It returns the manifest's
// digest.
func push(t *testing.T, tar, ref string) string {
	img, err := tarball.ImageFromPath(tar, nil)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// nodeImage asks the node's containerd, through CRI, for ref: nil when
// it has no such image; remove removes it.
func nodeImage(t *testing.T, c *kubetest.Cluster, ref string, remove bool) *runtimeapi.Image {
	conn, err := grpc.NewClient("unix://"+c.ContainerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	is := runtimeapi.NewImageServiceClient(conn)
	resp, err := is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("CRI ImageStatus %s: %v", ref, err)
	}
	if remove && resp.Image != nil {
		if _, err := is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: resp.Image.Id}}); err != nil {
			t.Fatalf("CRI RemoveImage %s: %v", resp.Image.Id, err)
		}
	}
	return resp.Image
}

// registryTarget is the kubernetes target of run, its Sandbox image from
// image (--kube-image); with containerd, it reaches the node's
// containerd too (--kube-containerd).
func registryTarget(t *testing.T, c *kubetest.Cluster, run *runs.Run, image string, containerd bool) *kubernetes.Kubernetes {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := kubernetes.Flags{Kubeconfig: c.Kubeconfig, Image: image, SeccompDir: filepath.Join(c.Dir, "kubelet", "seccomp")}
	if containerd {
		o.Containerd = c.ContainerdSocket
	}
	k, err := kubernetes.New(kubernetes.Options{Run: run, Kube: o, EngineCommand: []string{exe, engineChild}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestImageFromRegistry: the Sandbox image pulled from a real registry
// (go-containerregistry's, in memory, on loopback, plain HTTP as
// containerd's CRI speaks to a loopback registry) by its manifest's
// digest, its id checked there: the conformance suite with the node's
// containerd reachable (the image pulled through CRI, recorded, removed);
// without it, a Sandbox whose pod names REPO@sha256:MANIFEST and runs
// it, nothing recorded of the image, nothing of the run left after
// teardown, the node's copy left (to the kubelet's garbage collection);
// and a registry holding another image, or none, refused with both ids
// and how to push.
func TestImageFromRegistry(t *testing.T) {
	c := kubetest.Shared(t)
	// Its own command, so its id is not TestConformance's: an image the
	// node has already is not the run's, and the tests must not meet.
	img := chrootImage(t, bundleRef, "sh", "-c", "exit 0")
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/sealbench/sandbox"
	digest := push(t, img.Tar, repo+":build-linux-0123456789ab")
	pinned := repo + "@" + digest
	if im := nodeImage(t, c, img.ID.String(), false); im != nil {
		t.Fatalf("the node has %s already: %v", img.ID, im.RepoTags)
	}

	t.Run("Conformance", func(t *testing.T) {
		provisiontest.Run(t, &provisiontest.Suite{
			// The repository alone: at the bundle image's tag.
			New:    func(t *testing.T, run *runs.Run) provision.Target { return registryTarget(t, c, run, repo, true) },
			Image:  img,
			Engine: manifests.EngineKubernetes,
		})
		if im := nodeImage(t, c, img.ID.String(), false); im != nil {
			t.Errorf("after the suite's teardown the node still has %s (%v)", img.ID, im.RepoDigests)
		}
	})

	t.Run("WithoutContainerd", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		run, state := provisiontest.NewRun(t)
		k := registryTarget(t, c, run, repo+":build-linux-0123456789ab", false)
		if err := k.Create(ctx); err != nil {
			t.Fatal(err)
		}
		if err := k.InstallImage(ctx, img); err != nil {
			t.Fatal(err)
		}
		for _, e := range run.Ledger.Entries() {
			if e.Kind == manifests.ResourceImage {
				t.Errorf("the image is recorded (%+v), with no containerd to remove it through", e)
			}
		}
		cli, err := engine.NewClient(k.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		got, err := cli.ImageInspect(ctx, img.ID.String())
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != img.ID.String() || len(got.RepoDigests) != 1 || got.RepoDigests[0] != pinned {
			t.Errorf("inspect of the image: id %s, repo digests %v; want %s, [%s]", got.ID, got.RepoDigests, img.ID, pinned)
		}
		id, err := engine.CreateSandbox(ctx, cli, run.Ledger, engine.Sandbox{RunID: run.ID, Target: kubernetes.Name, Endpoint: k.Endpoint(),
			Image: img.ID, Name: "pulled", Cmd: []string{"sleep", "600"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			t.Fatalf("starting a Sandbox of the pulled image: %v", err)
		}
		pod, err := c.Client.CoreV1().Pods("default").Get(ctx, kubeengine.PodName(engine.SandboxName(run.ID, "pulled")), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if im := pod.Spec.Containers[0].Image; im != pinned {
			t.Errorf("the pod's image is %s, want %s", im, pinned)
		}
		if st := pod.Status.ContainerStatuses; len(st) != 1 || !strings.HasSuffix(st[0].ImageID, "@"+digest) {
			t.Errorf("the pod's container status %+v: want its imageID at %s", st, digest)
		}
		ci, err := cli.ContainerInspect(ctx, id)
		if err != nil || ci.Image != img.ID.String() {
			t.Errorf("container inspect: image %v (%v), want %s", ci.ContainerJSONBase, err, img.ID)
		}
		if _, err := runs.Teardown(ctx, run.Dir, runs.TeardownOptions{}); err != nil {
			t.Fatalf("teardown: %v", err)
		}
		res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Targets: []string{kubernetes.Name}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Leftovers {
			if r.Run == run.ID || strings.HasPrefix(r.Key, state) {
				t.Errorf("audit after teardown finds %s", r)
			}
		}
		// The kubelet pulled it from the registry; it stays on the node.
		im := nodeImage(t, c, img.ID.String(), true)
		if im == nil || !strings.Contains(strings.Join(im.RepoDigests, " "), pinned) {
			t.Errorf("the node's copy after teardown: %+v, want the image pulled as %s", im, pinned)
		}
	})

	t.Run("AnotherImageIsRefused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		other := chrootImage(t, bundleRef, "sh")
		push(t, other.Tar, repo+":other")
		run, _ := provisiontest.NewRun(t)
		for _, tc := range []struct{ image, want string }{
			{repo + ":other", "is image " + other.ID.String()},
			{repo + ":absent", "no such image in the registry: " + repo + ":absent"},
		} {
			k := registryTarget(t, c, run, tc.image, true)
			err := k.InstallImage(ctx, img)
			var ie *provision.InputError
			if !errors.As(err, &ie) {
				t.Errorf("--kube-image %s: %v, want a refusal of the input", tc.image, err)
				continue
			}
			msg := err.Error() + " " + ie.Hint
			t.Logf("--kube-image %s: %v\n  hint: %s", tc.image, err, ie.Hint)
			for _, want := range []string{tc.want, img.ID.String(), "docker push " + repo + ":", "docker load -i " + img.Tar} {
				if !strings.Contains(msg, want) {
					t.Errorf("--kube-image %s: %q does not say %q", tc.image, msg, want)
				}
			}
		}
		for _, e := range run.Ledger.Entries() {
			if e.Kind == manifests.ResourceImage {
				t.Errorf("a refused image is in the ledger: %+v", e)
			}
		}
	})
}
