package kubeengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sealbench/sealbench/internal/engineapi"
)

// criLimit bounds a CRI image call other than a pull.
const criLimit = 30 * time.Second

var errNoContainerd = fmt.Errorf("%w: images: this kube-engine reaches no containerd of the node (--containerd): it can neither load nor remove images, and inspects only those pulled through it", errNotImplemented)

// images runs f with a CRI image service client of the node's runtime,
// for limit at most.
func (s *Server) images(ctx context.Context, limit time.Duration, f func(ctx context.Context, c runtimeapi.ImageServiceClient) error) error {
	if s.c.Containerd == "" {
		return errNoContainerd
	}
	conn, err := grpc.NewClient("unix://"+s.c.Containerd, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("CRI client for %s: %w", s.c.Containerd, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return f(ctx, runtimeapi.NewImageServiceClient(conn))
}

// imageStatus asks the node's runtime, through CRI, about ref (a name or
// an image id); nil when it has no such image.
func (s *Server) imageStatus(ctx context.Context, ref string) (im *runtimeapi.Image, err error) {
	err = s.images(ctx, criLimit, func(ctx context.Context, c runtimeapi.ImageServiceClient) error {
		resp, err := c.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			return fmt.Errorf("CRI ImageStatus %s at %s: %w", ref, s.c.Containerd, err)
		}
		im = resp.Image
		return nil
	})
	return im, err
}

// ImageDelete removes the image ref names from the node's runtime, every
// name it has with it (CRI RemoveImage), as `docker rmi` of an id does:
// teardown removes what the run loaded. force changes nothing: the image
// goes with every name it has.
func (s *Server) ImageDelete(ctx context.Context, ref string, _ bool) (any, error) {
	id, err := s.imageID(ctx, ref)
	if err != nil {
		return nil, err
	}
	err = s.images(ctx, criLimit, func(ctx context.Context, c runtimeapi.ImageServiceClient) error {
		if _, err := c.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}}); err != nil {
			return fmt.Errorf("CRI RemoveImage %s at %s: %w", id, s.c.Containerd, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return []image.DeleteResponse{{Deleted: id}}, nil
}

// imageID is the id (the config's digest) of the image ref names.
func (s *Server) imageID(ctx context.Context, ref string) (string, error) {
	im, err := s.imageStatus(ctx, ref)
	if err != nil {
		return "", err
	}
	if im == nil {
		return "", fmt.Errorf("%w: No such image: %s", errNotFound, ref)
	}
	return im.Id, nil
}

// ImageInspect is the image as the node's runtime has it (CRI), or as its
// registry has it when it was pulled through a kube-engine that reaches
// no containerd.
func (s *Server) ImageInspect(ctx context.Context, ref string) (any, error) {
	if p := s.pulledImage(ref); p != nil && s.c.Containerd == "" {
		return inspectPulled(p), nil
	}
	im, err := s.imageStatus(ctx, ref)
	if err != nil {
		return nil, err
	}
	if im == nil {
		return nil, fmt.Errorf("%w: No such image: %s", errNotFound, ref)
	}
	return image.InspectResponse{ID: im.Id, RepoTags: nonNil(im.RepoTags), RepoDigests: nonNil(im.RepoDigests),
		Size: int64(im.Size), Os: "linux"}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ctrImported is a line of `ctr images import`'s output.
var ctrImported = regexp.MustCompile(`(?m)^unpacking (\S+) \(sha256:[0-9a-f]{64}\)`)

// ImageLoad imports a `docker save` tar into the node's containerd, in
// the namespace the kubelet uses, and answers as dockerd does.
func (s *Server) ImageLoad(w http.ResponseWriter, r *http.Request) {
	if s.c.Containerd == "" {
		engineapi.Fail(w, errNoContainerd)
		return
	}
	cmd := exec.CommandContext(r.Context(), s.ctr, "--address", s.c.Containerd, "--namespace", "k8s.io", "images", "import", "-")
	cmd.Stdin = r.Body
	out, err := cmd.CombinedOutput()
	if err != nil {
		engineapi.Fail(w, fmt.Errorf("%w: loading the image into the node's containerd (ctr images import): %v: %s", errBadInput, err, bytes.TrimSpace(out)))
		return
	}
	var lines []string
	var errs []error
	for _, m := range ctrImported.FindAllStringSubmatch(string(out), -1) {
		name := m[1]
		lines = append(lines, "Loaded image: "+name)
		if id, err := s.imageID(r.Context(), name); err == nil {
			lines = append(lines, "Loaded image ID: "+id)
		} else {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		engineapi.Fail(w, fmt.Errorf("after loading: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for _, l := range lines {
		json.NewEncoder(w).Encode(map[string]string{"stream": l + "\n"})
	}
	if len(lines) == 0 {
		json.NewEncoder(w).Encode(map[string]string{"stream": strings.TrimSpace(string(out)) + "\n"})
	}
}
