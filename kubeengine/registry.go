package kubeengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sealbench/sealbench/internal/engineapi"
)

// Resolved is an image as a registry holds it: the manifest pods name it
// by, and the config its id is the digest of.
type Resolved struct {
	// Ref is the repository at the manifest's digest (REPO@sha256:...):
	// what a pod names, so that the node pulls exactly this manifest, and
	// through it this config and these layers (content addressing).
	Ref    name.Digest
	ID     string // the config's digest, a docker image id
	Config *v1.ConfigFile
	Size   int64 // the config's and the layers' sizes, compressed
}

// ErrNoSuchImage is what Resolve wraps when the registry has no image at
// the reference (or none for the platform).
var ErrNoSuchImage = errors.New("no such image in the registry")

// Resolve looks ref up in its registry (credentials from
// authn.DefaultKeychain: the docker config and its credential helpers)
// and returns its image for platform: an index or manifest list picks
// that platform's manifest. A registry on localhost or a loopback
// address is spoken to over plain HTTP, as containerd's CRI does.
func Resolve(ctx context.Context, ref name.Reference, platform v1.Platform) (*Resolved, error) {
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(platform), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)) ||
			strings.Contains(err.Error(), "no child with platform") {
			return nil, fmt.Errorf("%w: %s for %s: %v", ErrNoSuchImage, ref, platform, err)
		}
		return nil, fmt.Errorf("resolving %s (%s) in its registry: %w", ref, platform, err)
	}
	dg, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("the manifest of %s: %w", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("the manifest of %s: %w", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("the config of %s: %w", ref, err)
	}
	size := m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return &Resolved{Ref: ref.Context().Digest(dg.String()), ID: m.Config.Digest.String(), Config: cf, Size: size}, nil
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// pullLimit bounds a pull into the node's containerd.
const pullLimit = 10 * time.Minute

// pulledImage is the image this kube-engine pulled whose id, or pinned
// reference, is ref; nil when none.
func (s *Server) pulledImage(ref string) *Resolved {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pulled[ref]; ok {
		return p
	}
	for _, p := range s.pulled {
		if p.Ref.String() == ref {
			return p
		}
	}
	return nil
}

// ImageCreate is the Engine's POST /images/create?fromImage=REPO&tag=TAG
// (a tag, or a digest): the image is resolved in its registry for the
// platform asked (default the node's), pulled into the node's containerd
// through CRI when this kube-engine reaches it, and from then on a
// container of its id runs as a pod that names it REPO@sha256:MANIFEST.
// Without the node's containerd nothing is pulled here: the kubelet pulls
// it when the first pod starts. Credentials come from this host's docker
// config (authn.DefaultKeychain), not X-Registry-Auth; the node pulls
// with its own.
func (s *Server) ImageCreate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	if q.Get("fromSrc") != "" {
		engineapi.Fail(w, fmt.Errorf("%w: kube-engine pulls images from registries (fromImage); it does not import (fromSrc)", errNotImplemented))
		return
	}
	refStr := q.Get("fromImage")
	switch tag := q.Get("tag"); {
	case tag == "":
	case strings.Contains(tag, ":"):
		refStr += "@" + tag
	default:
		refStr += ":" + tag
	}
	ref, err := name.ParseReference(refStr)
	if err != nil {
		engineapi.Fail(w, fmt.Errorf("%w: invalid reference format: %v", errBadInput, err))
		return
	}
	var platform v1.Platform
	if p := q.Get("platform"); p != "" {
		pp, err := v1.ParsePlatform(p)
		if err != nil {
			engineapi.Fail(w, fmt.Errorf("%w: platform %q: %v", errBadInput, p, err))
			return
		}
		platform = *pp
	} else {
		n, err := s.node(ctx)
		if err != nil {
			engineapi.Fail(w, err)
			return
		}
		platform = v1.Platform{OS: n.Status.NodeInfo.OperatingSystem, Architecture: n.Status.NodeInfo.Architecture}
	}
	res, err := Resolve(ctx, ref, platform)
	if errors.Is(err, ErrNoSuchImage) {
		err = fmt.Errorf("%w: %v", errNotFound, err)
	}
	if err != nil {
		engineapi.Fail(w, err)
		return
	}
	if s.c.Containerd != "" {
		if err := s.criPull(ctx, res); err != nil {
			engineapi.Fail(w, err)
			return
		}
	}
	s.mu.Lock()
	s.pulled[res.ID] = res
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.Encode(map[string]string{"status": "Pulling from " + ref.Context().String(), "id": ref.Identifier()})
	enc.Encode(map[string]string{"status": "Digest: " + res.Ref.DigestStr()})
	enc.Encode(map[string]string{"status": "Status: Image " + res.ID + " is " + res.Ref.String()})
}

// criPull pulls res into the node's containerd (CRI PullImage of its
// pinned reference) and checks the image that results is res's id.
func (s *Server) criPull(ctx context.Context, res *Resolved) error {
	return s.images(ctx, pullLimit, func(ctx context.Context, c runtimeapi.ImageServiceClient) error {
		resp, err := c.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: res.Ref.String()}})
		if err != nil {
			return fmt.Errorf("CRI PullImage %s at %s: %w", res.Ref, s.c.Containerd, err)
		}
		if resp.ImageRef != res.ID {
			return fmt.Errorf("the node's containerd pulled %s as image %s, not %s", res.Ref, resp.ImageRef, res.ID)
		}
		return nil
	})
}

// inspectPulled answers an image inspect of a pulled image from what its
// registry said: for a kube-engine without the node's containerd, which
// cannot ask the node.
func inspectPulled(p *Resolved) image.InspectResponse {
	return image.InspectResponse{ID: p.ID, RepoTags: []string{}, RepoDigests: []string{p.Ref.String()}, Size: p.Size,
		Os: p.Config.OS, Architecture: p.Config.Architecture, Variant: p.Config.Variant, Created: p.Config.Created.UTC().Format(time.RFC3339Nano)}
}

// runsPulled checks that a container's image, as its status gives it (a
// repo digest, REPO@sha256:..., for an image the node pulled), is the
// manifest p pins: a node that ran something else fails the start.
func (s *Server) runsPulled(ctx context.Context, got string, p *Resolved) error {
	want := "@" + p.Ref.DigestStr()
	if strings.HasSuffix(got, want) {
		return nil
	}
	if s.c.Containerd != "" {
		// The runtime gives one repo digest; the image may have several.
		if im, err := s.imageStatus(ctx, got); err == nil && im != nil {
			for _, d := range im.RepoDigests {
				if strings.HasSuffix(d, want) {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("the container runs image %s, not %s (the manifest checked to be image %s)", got, p.Ref, p.ID)
}
