//go:build !sealbench_bundle

package cmd

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
)

func newProvisionCmd(g *global) *cobra.Command {
	var bundlePath, key, expect string
	var insecure bool
	var fuseURing fuseURingFlag
	var targets targetFlags
	var debs debSettings
	var ssh sshSettings
	c := &cobra.Command{
		Use:   "provision " + targetUsageLine() + "[:PARAM][@NODE] | KIND@ssh://USER@HOST[:PORT] --bundle B",
		Short: "Bring up a target from a verified bundle and leave it up",
		Long: `Verify the bundle (signature, then every file), take its Sandbox image from
<bundle>.image/ (what seal writes; built from the pinned packages when it is
missing), bring the target up, load the image into its Engine, and leave it up.
Prints the run id, the Engine endpoint (for DOCKER_HOST) and the target's
identity: kernel, CPUs, memory, engine. A target on a remote host
(KIND@ssh://USER@HOST[:PORT], or KIND@ssh://ALIAS with what ~/.ssh/config
gives the alias: HostName, Port, User, IdentityFile, UserKnownHostsFile,
ProxyJump; the flags win) is reached over SSH (known_hosts checked, keys
only: your agent, the IdentityFile, --ssh-identity); what reaches it once
provision exits is printed too.

` + targetHelp() + `
Every resource is recorded in the run's ledger before it is created, in the
run directory under $SEALBENCH_STATE_DIR (default /var/lib/sealbench as root,
~/.local/state/sealbench otherwise). ` + "`sealbench teardown --run ID`" + ` takes it all
down; ` + "`sealbench audit`" + ` proves nothing is left. As root, on this host's kernel,
it turns the host's FUSE over io_uring on until teardown, where the kernel has
it (recorded, and put back once no run relies on it; --fuse-uring=off leaves
it). More: docs/targets.md.`,
		Example: targetExamples("provision") + `

  # Then drive the Engine it printed with the docker CLI, and take it down:
  DOCKER_HOST=<the endpoint it printed> docker images
  sealbench teardown --run <run>`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			specs, err := orchestrate.CheckTargets([]string{args[0]})
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
			if err := orchestrate.CheckBundleArgs(bundlePath, expect, "provision runs the bundle's binaries"); err != nil {
				return err
			}
			if err := debs.check(); err != nil {
				return err
			}
			if err := targets.check(); err != nil {
				return err
			}
			if err := fuseURing.check([]string{target}, ""); err != nil {
				return err
			}
			p := newProgress(g.stderr, "provision")
			defer p.Close()
			b, err := orchestrate.OpenBundle(c.Context(), orchestrate.BundleOptions{Dir: bundlePath, Key: key, Expect: expect, Insecure: insecure, Debs: debs.options(), Log: p.Logf})
			var ce *bundle.ContentError
			if errors.As(err, &ce) {
				return &problemsError{ce}
			}
			if err != nil {
				return err
			}
			out, err := orchestrate.Provision(c.Context(), orchestrate.ProvisionOptions{Target: target, Remote: far, Param: specs[0].Param, Node: specs[0].Node, Kind: specs[0].Kind, SSH: ssh.options(), Bundle: b, Options: targets.set, FUSEURing: fuseURing.mode, Log: p.Logf})
			p.Close()
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			id := out.Identity
			fmt.Fprintf(g.stdout, "%s is up (run %s)\n  endpoint  %s\n  engine    %s %s\n  kernel    %s (%s)\n  cpus      %d\n  memory    %s\n  io_uring  %s\n  image     %s %s\n  run dir   %s\n\n  export DOCKER_HOST=%s\n  sealbench teardown --run %s   # when done\n",
				// What the Engine says of itself is shown escaped.
				target, out.Run, out.Endpoint, cliutil.Printable(id.Engine), cliutil.Printable(id.EngineVersion), cliutil.Printable(id.Kernel), cliutil.Printable(id.Arch), id.CPUs, humanBytes(id.MemoryBytes),
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
	c.Flags().StringVar(&bundlePath, "bundle", "", "verified bundle directory, or oci://REGISTRY/REPO[:TAG|@DIGEST] to pull it from (required)")
	c.Flags().BoolVar(&insecure, "insecure", false, "with --bundle oci://: allow plain HTTP to a registry that is not on loopback")
	c.Flags().StringVar(&expect, "id", "", "pin the bundle: refuse a validly signed bundle with another name (build-linux-<hash>)")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to check the bundle's signature with")
	addFUSEURingFlag(c.Flags(), &fuseURing)
	targets.flags(c.Flags(), provision.CommandProvision)
	debs.flags(c.Flags())
	ssh.flags(c.Flags())
	return c
}
