package kubeengine

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
)

// platformImage is a random image whose config says p.
func platformImage(t *testing.T, p v1.Platform) v1.Image {
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestPullFromARegistry: a kube-engine without the node's containerd
// pulls from a real registry (go-containerregistry's, in memory, on
// loopback): an index gives the platform asked's manifest, inspect of the
// id answers from the registry, the pod names the manifest by digest, a
// container status naming another manifest fails the check, and a tag the
// registry lacks is a 404 that says so.
func TestPullFromARegistry(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	amd, arm := v1.Platform{OS: "linux", Architecture: "amd64"}, v1.Platform{OS: "linux", Architecture: "arm64"}
	ia, ib := platformImage(t, amd), platformImage(t, arm)
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: ia, Descriptor: v1.Descriptor{Platform: &amd}},
		mutate.IndexAddendum{Add: ib, Descriptor: v1.Descriptor{Platform: &arm}})
	repo := strings.TrimPrefix(reg.URL, "http://") + "/sealbench/sandbox"
	tag, err := name.NewTag(repo + ":multi")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := ib.Digest()
	wantID, _ := ib.ConfigName()

	s := newServer(Config{Namespace: "ns", Node: "n1", FUSEResource: "sealbench.dev/fuse", RunID: "run1"}, nil, nil)
	srv := httptest.NewServer(s)
	defer srv.Close()
	cli, err := engine.NewClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	if err := engine.PullImage(ctx, cli, srv.URL, tag.String(), "linux/arm64"); err != nil {
		t.Fatal(err)
	}
	got, err := cli.ImageInspect(ctx, wantID.String())
	if err != nil {
		t.Fatal(err)
	}
	pinned := repo + "@" + wantDigest.String()
	if got.ID != wantID.String() || len(got.RepoDigests) != 1 || got.RepoDigests[0] != pinned || got.Architecture != "arm64" || got.Size <= 0 {
		t.Errorf("inspect: id %s, repo digests %v, architecture %s, size %d; want %s, [%s], arm64", got.ID, got.RepoDigests, got.Architecture, got.Size, wantID, pinned)
	}

	id, err := manifests.ParseDigest(wantID.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg, hc := engine.SandboxConfig("run1", id, []string{"sh"}, manifests.EngineKubernetes, "", false)
	hc.SecurityOpt = []string{"no-new-privileges"}
	pod, err := s.podSpec(containerRecord{ID: strings.Repeat("ab", 32), Name: "probe", Config: cfg, HostConfig: hc})
	if err != nil {
		t.Fatal(err)
	}
	if c := pod.Spec.Containers[0]; c.Image != pinned || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("the pod's image is %s (%s), want %s pulled if not present", c.Image, c.ImagePullPolicy, pinned)
	}
	if err := s.checkImage(ctx, pinned, cfg.Image); err != nil {
		t.Errorf("a container running %s: %v", pinned, err)
	}
	otherDigest, _ := ia.Digest()
	other := repo + "@" + otherDigest.String()
	if err := s.checkImage(ctx, other, cfg.Image); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), pinned) {
		t.Errorf("a container running %s: %v, want an error naming it and %s", other, err, pinned)
	}

	err = engine.PullImage(ctx, cli, srv.URL, repo+":absent", "linux/arm64")
	if err == nil || !strings.Contains(err.Error(), "no such image in the registry") || !strings.Contains(err.Error(), "absent") {
		t.Errorf("pulling a tag the registry lacks: %v", err)
	}
	err = engine.PullImage(ctx, cli, srv.URL, tag.String(), "linux/s390x")
	if err == nil || !strings.Contains(err.Error(), "no such image in the registry") {
		t.Errorf("pulling a platform the index lacks: %v", err)
	}
}
