//go:build !sealbench_bundle

package cmd

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/host"
	"github.com/sealbench/sealbench/provision/remote"
)

func newProvisionCmd(g *global) *cobra.Command {
	var bundlePath, key, expect string
	var fuseURing bool
	var vm vmSettings
	var kube kubeSettings
	var debs debSettings
	var ssh sshSettings
	c := &cobra.Command{
		Use:   "provision local|docker|gvisor|lima|qemu|apple|microsandbox|kubernetes[:RUNTIMECLASS]|docker@ssh://USER@HOST[:PORT]|local@ssh://root@HOST[:PORT] --bundle B",
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
           apple and microsandbox drive only the releases of their tools
           whose sources they were checked against (--allow-untested-tool
           names them): a newer tool is refused unless that flag is given.
  lima     a Lima VM (limactl v1.2.1 from make lima-tools, run as uid 65534)
           under QEMU with TCG, never KVM, booted from the VM image of make
           vm-image, the bundle copied in and checked, the stand-in inside
           reached through Lima's socket forwarding. Emulated: its timings
           are the emulator's. Needs root.
  qemu     a QEMU microvm sealbench starts itself (no Lima): TCG unless
           --accel kvm (never chosen for you: on some hosts /dev/kvm opens and
           guests hang), the VM image of make vm-image booted directly, no
           network device, the bundle on a read-only disk and checked in the
           guest as lima checks it, the stand-in reached over a virtio-serial
           port (each Engine connection a stream; sealbench qemu-link serves
           the socket). Emulated under TCG.

  docker@ssh://USER@HOST[:PORT]
           that host's dockerd (its sessions' DOCKER_HOST, or
           /var/run/docker.sock), reached over SSH (known_hosts checked, keys
           only; --ssh-identity, --ssh-known-hosts) while provision loads the
           image and asks its identity. The forward dies with provision, so
           the endpoint printed is DOCKER_HOST=ssh://USER@HOST:PORT: the docker
           CLI reaches the same dockerd over your own ssh (~/.ssh/config, your
           known_hosts and keys) by running ` + "`docker system dial-stdio`" + ` there,
           which needs the docker CLI on the host. The image is recorded in the
           ledger with its host (and the host in the run's hosts.json), so
           ` + "`sealbench teardown --run ID`" + ` removes it over SSH.

  local@ssh://root@HOST[:PORT]
           the bundle's stand-in on that host, copied, checked and started
           there as root (as run does); it stays up in a session of its own.
           Its socket is reached only through a forward, and provision's dies
           with it: provision prints the ssh command that forwards it again
           (ssh -nNT -L <run dir>/.../engine.sock:<its socket there>
           root@HOST, your ssh) and DOCKER_HOST=unix://<that socket>.
           ` + "`sealbench teardown --run ID`" + ` stops it and removes its files over SSH.

Every resource is recorded in the run's ledger before it is created, in the
run directory under $SEALBENCH_STATE_DIR (default /var/lib/sealbench as root,
~/.local/state/sealbench otherwise). ` + "`sealbench teardown --run ID`" + ` takes it all
down; ` + "`sealbench audit`" + ` proves nothing is left.

--fuse-uring turns the host's FUSE over io_uring on (the fuse module's
enable_uring, kernel-wide, off by default) for as long as the run is up: the
change is recorded in the ledger before it is made, the target's identity says
fuseURing "on", and teardown puts the old value back. A VM target (lima, qemu) runs
its own kernel: for it the flag changes nothing, and says so ("n/a"). It needs
root and a kernel with FUSE over io_uring, and is refused otherwise (exit 3).`,
		Example: `  sudo sealbench provision local --bundle out/build-linux-0123456789ab
  sealbench provision docker --bundle out/build-linux-0123456789ab --key keys/sealbench.pub --json
  sealbench provision local --bundle /mnt/usb/build-linux-0123456789ab --id build-linux-0123456789ab
  sealbench provision apple --bundle out/build-linux-0123456789ab --vm-cpus 4 --vm-memory 4096   # on a Mac

  # With FUSE over io_uring on until teardown (enable_uring, recorded, then put back):
  sudo sealbench provision local --bundle out/build-linux-0123456789ab --fuse-uring

  # A remote host's dockerd, then the docker CLI over your ssh:
  sealbench provision docker@ssh://bench@gpu1 --bundle out/build-linux-0123456789ab --ssh-known-hosts ~/.ssh/known_hosts

  # The bundle's stand-in on a remote host; run the ssh -L command it prints, then use its endpoint:
  sealbench provision local@ssh://root@10.0.0.7 --bundle out/build-linux-0123456789ab

  # Pods of the cluster your kubeconfig names, the image imported into the node's containerd;
  # DOCKER_HOST is then the kube-engine, which maps the Engine API to pods:
  sudo sealbench provision kubernetes --bundle out/build-linux-0123456789ab \
    --kubeconfig ~/.kube/config --kube-containerd /run/containerd/containerd.sock

  # A node anywhere: it pulls the image from your registry, where its id is checked first
  # (push it there once: the refusal says how); pods name it REPO@sha256:<manifest digest>:
  sealbench provision kubernetes --bundle out/build-linux-0123456789ab \
    --kubeconfig ~/.kube/config --kube-image registry.example.com:5000/sealbench/sandbox

  # Then drive its Engine with the docker CLI, and take it down:
  DOCKER_HOST=unix:///var/lib/sealbench/runs/<run>/local/sock/standin.sock docker images
  sealbench teardown --run <run>`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			specs, err := host.CheckTargets([]string{args[0]})
			if err != nil {
				return err
			}
			var far *remote.Spec
			if specs[0].Host != nil {
				far = &specs[0]
			}
			target := specs[0].Name
			if err := ssh.check(); err != nil {
				return err
			}
			if bundlePath == "" {
				return usageErrorf("pass --bundle out/build-linux-<hash> (the bundle directory)", "--bundle is required")
			}
			if err := host.CheckBundleArgs(bundlePath, expect, "provision runs the bundle's binaries"); err != nil {
				return err
			}
			if err := debs.check(); err != nil {
				return err
			}
			if err := vm.check(); err != nil {
				return err
			}
			if err := kube.check(); err != nil {
				return err
			}
			if fuseURing {
				if err := host.CheckFUSEURing([]string{target}, ""); err != nil {
					return err
				}
			}
			p := newProgress(g.stderr, "provision")
			defer p.Close()
			b, err := host.OpenBundle(c.Context(), host.BundleOptions{Dir: bundlePath, Key: key, Expect: expect, Debs: debs.host(), Log: p.Logf})
			var ce *bundle.ContentError
			if errors.As(err, &ce) {
				return &problemsError{ce}
			}
			if err != nil {
				return err
			}
			out, err := host.Provision(c.Context(), host.ProvisionOptions{Target: target, Remote: far, Param: specs[0].Param, Node: specs[0].Node, Kind: specs[0].Kind, SSH: ssh.host(), Bundle: b, VM: vm.host(kube), FUSEURing: fuseURing, Log: p.Logf})
			p.Close()
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			id := out.Identity
			fmt.Fprintf(g.stdout, "%s is up (run %s)\n  endpoint  %s\n  engine    %s %s\n  kernel    %s (%s)\n  cpus      %d\n  memory    %s\n  io_uring  %s\n  image     %s %s\n  run dir   %s\n\n  export DOCKER_HOST=%s\n  sealbench teardown --run %s   # when done\n",
				target, out.Run, out.Endpoint, id.Engine, id.EngineVersion, id.Kernel, id.Arch, id.CPUs, humanBytes(id.MemoryBytes),
				id.FUSEURing, out.Image.Ref, out.Image.ID, out.RunDir, out.Endpoint, out.Run)
			switch {
			case out.Forward != "":
				fmt.Fprintf(g.stdout, "\n  # The stand-in runs on %s; its socket is reached through a forward, which\n  # provision's connection no longer holds. Keep this running while you use it:\n  %s &\n  # (your ssh: ~/.ssh/config, its known_hosts and keys, not --ssh-identity/--ssh-known-hosts)\n", out.Host, out.Forward)
			case out.Host != "":
				fmt.Fprintf(g.stdout, "\n  # DOCKER_HOST=ssh:// runs your ssh (~/.ssh/config, its known_hosts and keys), not\n  # --ssh-identity/--ssh-known-hosts, and `docker system dial-stdio` on %s.\n", out.Host)
			}
			return nil
		},
	}
	c.Flags().StringVar(&bundlePath, "bundle", "", "verified bundle directory (required)")
	c.Flags().StringVar(&expect, "id", "", "pin the bundle: refuse a validly signed bundle with another name (build-linux-<hash>)")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to check the bundle's signature with")
	c.Flags().BoolVar(&fuseURing, "fuse-uring", false, "turn the host's enable_uring (FUSE over io_uring, kernel-wide) on until teardown; recorded, and put back then")
	vm.flags(c.Flags())
	kube.flags(c.Flags(), true)
	debs.flags(c.Flags())
	ssh.flags(c.Flags())
	return c
}
