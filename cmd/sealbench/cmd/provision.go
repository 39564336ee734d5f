//go:build !sealbench_bundle

package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/vmimages"
)

func newProvisionCmd(g *global) *cobra.Command {
	var bundlePath, key, expect string
	var vm vmSettings
	var debs debSettings
	c := &cobra.Command{
		Use:   "provision local|docker|lima|apple|microsandbox --bundle B",
		Short: "Bring up a target from a verified bundle and leave it up",
		Long: `Verify the bundle (signature, then every file), take its Sandbox image from
<bundle>.image/ (what seal writes; built from the pinned packages when it is
missing), bring the target up, load the image into its Engine, and leave it up.
Prints the run id, the Engine endpoint (for DOCKER_HOST) and the target's
identity: kernel, CPUs, memory, engine.

  local    the Engine API stand-in on this host, run from the bundle's own
           binary (copied into the run and checked against the manifest), its
           socket in a private directory of the run. Needs root.
  docker   the dockerd you have (DOCKER_HOST or the default socket).
  apple    one Apple container VM (macOS on Apple silicon) from the Sandbox
           image, running the stand-in, its socket published to the host.
  microsandbox
           one msb microVM from the Sandbox image, running the stand-in,
           reached through msb exec by a proxy process of the run.
  lima     a Lima VM (limactl v1.2.1 from make lima-tools, run as uid 65534)
           under QEMU with TCG, never KVM, booted from the VM image of make
           vm-image, the bundle copied in and checked, the stand-in inside
           reached through Lima's socket forwarding. Emulated: its timings
           are the emulator's. Needs root.

Every resource is recorded in the run's ledger before it is created, in the
run directory under $SEALBENCH_STATE_DIR (default /var/lib/sealbench as root,
~/.local/state/sealbench otherwise). ` + "`sealbench teardown --run ID`" + ` takes it all
down; ` + "`sealbench audit`" + ` proves nothing is left.`,
		Example: `  sudo sealbench provision local --bundle out/build-linux-0123456789ab
  sealbench provision docker --bundle out/build-linux-0123456789ab --key keys/sealbench.pub --json
  sealbench provision local --bundle /mnt/usb/build-linux-0123456789ab --id build-linux-0123456789ab
  sealbench provision apple --bundle out/build-linux-0123456789ab --vm-cpus 4 --vm-memory 4096   # on a Mac

  # Then drive its Engine with the docker CLI, and take it down:
  DOCKER_HOST=unix:///var/lib/sealbench/runs/<run>/local/sock/standin.sock docker images
  sealbench teardown --run <run>`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			target := args[0]
			if err := checkTargets([]string{target}); err != nil {
				return err
			}
			if bundlePath == "" {
				return usageErrorf("pass --bundle out/build-linux-<hash> (the bundle directory)", "--bundle is required")
			}
			if expect != "" && !strings.HasPrefix(expect, manifests.BundleNamePrefix) {
				return usageErrorf("--id takes a bundle name such as build-linux-0123456789ab", "--id %q is not a bundle name", expect)
			}
			if fi, err := os.Stat(bundlePath); err == nil && !fi.IsDir() {
				return usageErrorf("extract it (tar -xf "+bundlePath+") and pass the directory", "--bundle %s is a file: provision runs the bundle's binaries, so it takes the bundle directory", bundlePath)
			}
			if err := debs.check(); err != nil {
				return err
			}
			p := newProgress(g.stderr, "provision")
			defer p.Close()
			out, err := provisionTarget(c.Context(), p, target, bundlePath, key, expect, vm, debs)
			p.Close()
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			id := out.Identity
			fmt.Fprintf(g.stdout, "%s is up (run %s)\n  endpoint  %s\n  engine    %s %s\n  kernel    %s (%s)\n  cpus      %d\n  memory    %s\n  image     %s %s\n  run dir   %s\n\n  export DOCKER_HOST=%s\n  sealbench teardown --run %s   # when done\n",
				target, out.Run, out.Endpoint, id.Engine, id.EngineVersion, id.Kernel, id.Arch, id.CPUs, humanBytes(id.MemoryBytes),
				out.Image.Ref, out.Image.ID, out.RunDir, out.Endpoint, out.Run)
			return nil
		},
	}
	c.Flags().StringVar(&bundlePath, "bundle", "", "verified bundle directory (required)")
	c.Flags().StringVar(&expect, "id", "", "pin the bundle: refuse a validly signed bundle with another name (build-linux-<hash>)")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to check the bundle's signature with")
	vm.flags(c.Flags())
	debs.flags(c.Flags())
	return c
}

type provisioned struct {
	Run      string           `json:"run"`
	RunDir   string           `json:"runDir"`
	Target   string           `json:"target"`
	Endpoint string           `json:"endpoint"`
	Identity *engine.Identity `json:"identity"`
	Bundle   string           `json:"bundle"`
	Image    engine.Image     `json:"image"`
}

// provisionTarget verifies the bundle, finds its image, and provisions
// target in a new run. On failure, what it made is torn down again.
func provisionTarget(ctx context.Context, p *progress, target, bundlePath, key, expect string, vm vmSettings, debs debSettings) (_ *provisioned, err error) {
	v, err := loadVerifier(key)
	if err != nil {
		return nil, err
	}
	res, err := bundle.Verify(ctx, bundlePath, bundle.VerifyOptions{Verifier: v, Expect: expect})
	if err != nil {
		var ce *bundle.ContentError
		if errors.As(err, &ce) {
			return nil, &problemsError{ce}
		}
		return nil, err
	}
	p.Logf("verified %s (key %s)", res.Name, v.KeyID())
	img, err := sandboxImage(ctx, p, bundlePath, key, res, debs)
	if err != nil {
		return nil, err
	}
	state := provision.DefaultStateDir()
	run, err := provision.NewRun(state)
	if err != nil {
		return nil, fmt.Errorf("starting a run in %s (set %s to use another directory): %w", state, provision.StateDirEnv, err)
	}
	defer run.Close()
	p.Logf("run %s in %s", run.ID, run.Dir)
	defer func() {
		if err == nil {
			return
		}
		// Rollback on failure only: take down what this run made.
		if _, terr := provision.Teardown(context.WithoutCancel(ctx), run.Dir, provision.TeardownOptions{Log: p.Logf}); terr != nil {
			err = multierror.Append(err, fmt.Errorf("and tearing the failed run down: %w (run `sealbench teardown --run %s`)", terr, run.ID))
		}
	}()
	t, err := newTarget(target, run, bundlePath, res, img, vm, p.Logf)
	if err != nil {
		return nil, err
	}
	id, err := bringUp(ctx, t, img, p.Logf)
	if err != nil {
		return nil, err
	}
	return &provisioned{Run: run.ID, RunDir: run.Dir, Target: target, Endpoint: t.Endpoint(), Identity: id, Bundle: res.Name, Image: img}, nil
}

// sandboxImage takes the bundle's Sandbox image from <bundle>.image/, or
// builds it there when it is missing.
func sandboxImage(ctx context.Context, p *progress, bundlePath, key string, res *bundle.VerifyResult, debs debSettings) (engine.Image, error) {
	dir := filepath.Clean(bundlePath) + ".image"
	b, err := os.ReadFile(filepath.Join(dir, vmimages.SandboxInfo))
	if errors.Is(err, fs.ErrNotExist) {
		p.Logf("no Sandbox image in %s: building it from the pinned packages", dir)
		info, err := buildImage(ctx, p, bundlePath, key, dir, runtime.GOARCH, "", debs)
		if err != nil {
			return engine.Image{}, fmt.Errorf("building the Sandbox image (or run `sealbench image --bundle %s`): %w", bundlePath, err)
		}
		return imageOf(p, dir, info)
	}
	if err != nil {
		return engine.Image{}, fmt.Errorf("reading the Sandbox image's identity: %w", err)
	}
	var info vmimages.ImageInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return engine.Image{}, usageErrorf("rebuild it with `sealbench image --bundle "+bundlePath+"`", "%s: %v", filepath.Join(dir, vmimages.SandboxInfo), err)
	}
	if info.Bundle != "" && info.Bundle != res.Name {
		return engine.Image{}, usageErrorf("rebuild it with `sealbench image --bundle "+bundlePath+"`", "the Sandbox image in %s was built from %s, not %s", dir, info.Bundle, res.Name)
	}
	if err := info.ID.Validate(); err != nil {
		return engine.Image{}, usageErrorf("rebuild it with `sealbench image --bundle "+bundlePath+"`", "%s: image id: %v", filepath.Join(dir, vmimages.SandboxInfo), err)
	}
	return imageOf(p, dir, &info)
}

// imageOf is the image a run loads, with the package lock it was built from
// (read from beside it, for the pins), and says so loudly when that lock
// is a fresh one standing in for the committed lock.
func imageOf(p *progress, dir string, info *vmimages.ImageInfo) (engine.Image, error) {
	img := engine.Image{Tar: filepath.Join(dir, vmimages.SandboxTar), Ref: info.Ref, ID: info.ID}
	b, err := os.ReadFile(filepath.Join(dir, vmimages.SandboxLock))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Images built before the lock was kept beside them.
	case err != nil:
		return engine.Image{}, fmt.Errorf("reading the Sandbox image's lock: %w", err)
	default:
		if got := manifests.DigestOf(b); !info.LockDigest.IsZero() && got != info.LockDigest {
			return engine.Image{}, fmt.Errorf("%s has digest %s, but the image records lock %s: rebuild the image", filepath.Join(dir, vmimages.SandboxLock), got, info.LockDigest)
		}
		if img.Lock, err = manifests.ParsePackageLock(b); err != nil {
			return engine.Image{}, fmt.Errorf("the Sandbox image's lock: %w", err)
		}
	}
	if r := info.Relock; r != nil {
		img.Relocked = fmt.Sprintf("built from a fresh lock (%s) because %s of the committed lock %s are in no source; the image id differs from the committed one",
			r.Fresh.Short(12), strings.Join(r.Missing, ", "), r.Committed.Short(12))
		p.Logf("%s", r.Notice("Sandbox image"))
	}
	return img, nil
}
