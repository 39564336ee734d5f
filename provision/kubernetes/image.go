package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
)

// ImageRef is the reference --kube-image names: image itself when it
// carries a tag or a digest, or the repository it names at tag (the
// bundle image's own tag, build-linux-<hash>) when it names a repository
// alone.
func ImageRef(image, tag string) (name.Reference, error) {
	if repo, err := name.NewRepository(image); err == nil {
		if tag == "" {
			tag = name.DefaultTag
		}
		return repo.Tag(tag), nil
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("%q is not a repository, REPO:TAG or REPO@sha256:DIGEST: %w", image, err)
	}
	return ref, nil
}

// bundleTag is the tag of the Sandbox image's own reference
// (sealbench/sandbox:build-linux-<hash>), "" when it has none.
func bundleTag(ref string) string {
	if t, err := name.NewTag(ref); err == nil && strings.HasSuffix(ref, ":"+t.TagStr()) {
		return t.TagStr()
	}
	return ""
}

// imagePlatform reads the Sandbox image's config from its tar: its
// platform, which picks the manifest from an index in the registry, after
// checking the tar is the image img.ID names (the hint to push it must be
// right).
func imagePlatform(img engine.Image) (v1.Platform, error) {
	ti, err := tarball.ImageFromPath(img.Tar, nil)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("reading the Sandbox image %s: %w", img.Tar, err)
	}
	id, err := ti.ConfigName()
	if err != nil {
		return v1.Platform{}, fmt.Errorf("reading the Sandbox image %s: %w", img.Tar, err)
	}
	if id.String() != img.ID.String() {
		return v1.Platform{}, fmt.Errorf("the Sandbox image %s is image %s, not %s", img.Tar, id, img.ID)
	}
	cf, err := ti.ConfigFile()
	if err != nil {
		return v1.Platform{}, fmt.Errorf("reading the Sandbox image %s: %w", img.Tar, err)
	}
	return v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}, nil
}

// pushHint says how to put the bundle's Sandbox image where ref names it.
func pushHint(img engine.Image, ref name.Reference) string {
	tag := bundleTag(img.Ref)
	if t, ok := ref.(name.Tag); ok {
		tag = t.TagStr()
	}
	if tag == "" {
		tag = name.DefaultTag
	}
	to := ref.Context().Tag(tag).String()
	return fmt.Sprintf("push the bundle's Sandbox image there: docker load -i %s && docker tag %s %s && docker push %s (or, without Docker, crane push %s %s); the registry keeps its config, so the id stays %s",
		img.Tar, img.ID, to, to, img.Tar, to, img.ID)
}

// pullImage installs img from the registry --kube-image names: it
// resolves the reference here, for the image's platform, and refuses a
// manifest whose config is not img.ID; then the kube-engine pulls that
// manifest by its digest (into the node's containerd when it reaches it,
// otherwise the kubelet pulls it for the first pod), and every pod names
// it REPO@sha256:MANIFEST. The image is recorded, and so removed by
// teardown, only when the kube-engine reaches the node's containerd and
// the node did not have it: without that socket nothing here can remove
// it, and the node's copy is left to the kubelet's image garbage
// collection.
func (k *Kubernetes) pullImage(ctx context.Context, cli client.APIClient, img engine.Image) error {
	if err := img.ID.Validate(); err != nil {
		return fmt.Errorf("image to install: %w", err)
	}
	platform, err := imagePlatform(img)
	if err != nil {
		return err
	}
	ref, err := ImageRef(k.o.Kube.Image, bundleTag(img.Ref))
	if err != nil {
		return &provision.InputError{Err: fmt.Errorf("--kube-image: %w", err), Hint: "name a repository, such as registry.example.com/sealbench/sandbox"}
	}
	res, err := kubeengine.Resolve(ctx, ref, platform)
	if errors.Is(err, kubeengine.ErrNoSuchImage) {
		return &provision.InputError{Err: fmt.Errorf("--kube-image: %w; the bundle's Sandbox image is %s", err, img.ID), Hint: pushHint(img, ref)}
	}
	if err != nil {
		return fmt.Errorf("--kube-image: %w", err)
	}
	if res.ID != img.ID.String() {
		return &provision.InputError{Err: fmt.Errorf("--kube-image %s is image %s in the registry (manifest %s), not the bundle's Sandbox image %s", ref, res.ID, res.Ref.DigestStr(), img.ID),
			Hint: pushHint(img, ref)}
	}
	_, err = cli.ImageInspect(ctx, img.ID.String())
	if had := err == nil; !had && k.cfg.Containerd != "" {
		if err := k.record(manifests.LedgerEntry{Kind: manifests.ResourceImage, Key: img.ID.String(), Engine: k.Endpoint(), Detail: "pulled from " + res.Ref.String()}); err != nil {
			return err
		}
	}
	if err := engine.PullImage(ctx, cli, k.Endpoint(), res.Ref.String(), platform.String()); err != nil {
		return err
	}
	got, err := cli.ImageInspect(ctx, img.ID.String())
	if err != nil {
		return fmt.Errorf("after pulling %s, %s has no image %s: %w", res.Ref, k.Endpoint(), img.ID, err)
	}
	if got.ID != img.ID.String() {
		return fmt.Errorf("after pulling %s, %s answers image %s for %s", res.Ref, k.Endpoint(), got.ID, img.ID)
	}
	k.o.Log("the Sandbox image %s is %s; pods name it so", img.ID, res.Ref)
	return nil
}
