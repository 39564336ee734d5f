//go:build linux

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/vmimages"
)

// TestSandboxImageOnStandin is the real chain: seal this source tree, build
// the Sandbox image from the pinned Debian packages, load its docker save
// tar into the stand-in with the docker CLI, check the id the stand-in
// reports, and run inside it, with no network, what every target runs
// first (sha256sum -c of the bundle) and a cell body.
func TestSandboxImageOnStandin(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "docker")
	testenv.NeedCommand(t, "apt-get")
	bin := buildStandin(t)

	keys := t.TempDir()
	priv, _, err := sign.WriteKeyPair(keys, []byte(""), false)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadPrivateKey(priv, []byte(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sealed, err := bundle.Seal(ctx, bundle.SealOptions{Source: testenv.ModuleRoot(t), OutDir: t.TempDir(), Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	lock, lb, err := vmimages.DefaultLock("sandbox", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	img, err := vmimages.BuildSandbox(ctx, vmimages.SandboxOptions{
		Bundle: sealed.Dir, Manifest: sealed.Manifest, Lock: lock, LockBytes: lb, Relock: true,
		OutDir: filepath.Join(t.TempDir(), "image"), Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}

	d := startStandin(t, bin, "")
	d.mustDocker(t, "", "load", "-i", img.Tar)
	if id := strings.TrimSpace(d.mustDocker(t, "", "image", "inspect", "--format", "{{.Id}}", img.Ref)); id != img.ID.String() {
		t.Errorf("the stand-in reports image id %s, sealbench computed %s", id, img.ID)
	}
	out := d.mustDocker(t, "", "run", "--rm", "--network", "none", img.Ref, "sh", "-c",
		"cd "+vmimages.BundleMount+" && sha256sum -c --quiet SHA256SUMS && mkdir /tmp/w && cd /tmp/w && sh "+vmimages.BundleMount+"/cells/C12.sh && git rev-list --count HEAD && git ls-files | wc -l")
	if strings.TrimSpace(out) != "1\n100" {
		t.Errorf("in the Sandbox image on the stand-in: %q, want the bundle verified and C12's one commit of 100 files", out)
	}
	d.mustDocker(t, "", "rmi", img.Ref)
}
