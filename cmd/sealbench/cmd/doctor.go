//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/host"
)

func newDoctorCmd(g *global) *cobra.Command {
	var target string
	var ssh sshSettings
	var kube kubeSettings
	c := &cobra.Command{
		Use:   "doctor [--target T,...]",
		Short: "Say what this host can run, and for what it cannot, why and what to install",
		Long: `Look at this host and say which targets can run here: root, /dev/fuse,
FUSE passthrough in the kernel, FUSE over io_uring (and whether the fuse
module's enable_uring is on; optional), whether a memory balloon reports free
pages to a hypervisor (a warning, with what the protocol does about it: memory
freed seconds earlier is slow to write into again), the dockerd at DOCKER_HOST (or the default
socket), qemu-system-x86_64 and whether KVM is usable (it asks /dev/kvm for its
API version; it never starts a guest, and the qemu target uses KVM only with
--accel kvm), qemu-img and the VM image (make vm-image), limactl, mmdebstrap and apt, Apple's
container tool and its system service, and microsandbox's msb (on Linux with
/dev/kvm open for reading and writing, and a glibc its release runs on, which
it names). A tool newer than the releases
sealbench was checked against is refused (see --allow-untested-tool of run and
provision). For each thing missing it says why, and what to install or do.

--target lists only those targets. A target on a remote host
(KIND@ssh://USER@HOST[:PORT]) is looked at over SSH, each host once: that it
can be reached (its host key in known_hosts, or --ssh-known-hosts; a key it
accepts, from your agent or --ssh-identity; nothing prompts), its kernel
(uname), whether you log in as root (the stand-in needs it), sha256sum, and for
docker its dockerd (the host's docker CLI); and whether this sealbench can run
that target there at all.

doctor only looks; it changes nothing, and exits 0 whatever it finds (it
fails only if it cannot run at all, or on a --target it cannot parse).`,
		Example: `  sealbench doctor
  sudo sealbench doctor --json | jq '.targets[] | select(.ready)'
  sealbench doctor --target docker@ssh://bench@gpu1,local@ssh://root@10.0.0.7:2222 --ssh-identity ~/.ssh/bench_ed25519`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := ssh.check(); err != nil {
				return err
			}
			if err := kube.apply(); err != nil {
				return err
			}
			var targets []string
			if target != "" {
				targets = strings.Split(target, ",")
			}
			r, err := host.Doctor(c.Context(), host.DoctorOptions{Targets: targets, SSH: ssh.host()})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, r)
			}
			where := ""
			for _, ch := range r.Checks {
				if ch.Host != where {
					fmt.Fprintf(g.stdout, "\non %s:\n", ch.Host)
					where = ch.Host
				}
				mark := "ok"
				switch {
				case !ch.OK:
					mark = "NO"
				case ch.Warning != "":
					mark = "warn"
				}
				fmt.Fprintf(g.stdout, "%-5s%-18s %s\n", mark, ch.Name, ch.Detail)
				if !ch.OK && ch.Fix != "" {
					fmt.Fprintf(g.stdout, "     %-18s fix: %s\n", "", ch.Fix)
				}
				if ch.Warning != "" {
					fmt.Fprintf(g.stdout, "     %-18s note: %s\n", "", ch.Warning)
				}
			}
			fmt.Fprintln(g.stdout, "\ntargets:")
			for _, t := range r.Targets {
				state := "can run"
				if !t.Ready {
					state = "cannot run"
				}
				line := fmt.Sprintf("  %-13s %s", t.Target, state)
				if t.Host != "" {
					line = fmt.Sprintf("  %-13s %s on %s", t.Target, state, t.Host)
				}
				if len(t.Needs) > 0 {
					line += fmt.Sprintf(" (needs %v)", t.Needs)
				}
				if t.Note != "" {
					line += ": " + t.Note
				}
				fmt.Fprintln(g.stdout, line)
			}
			return nil
		},
	}
	c.Flags().StringVar(&target, "target", "", "look only at these targets, comma-separated; KIND@ssh://USER@HOST[:PORT] looks at that host over SSH")
	ssh.flags(c.Flags())
	kube.flags(c.Flags(), false)
	return c
}
