//go:build !sealbench_bundle

package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/provision"
)

func newDoctorCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what this host can run, and for what it cannot, why and what to install",
		Long: `Look at this host and say which targets can run here: root, /dev/fuse,
FUSE passthrough in the kernel, FUSE over io_uring (and whether the fuse
module's enable_uring is on; optional), the dockerd at DOCKER_HOST (or the default
socket), qemu-system-x86_64 and whether KVM is usable (it asks /dev/kvm for its
API version; it never starts a guest, and the qemu target uses KVM only with
--accel kvm), qemu-img and the VM image (make vm-image), limactl, mmdebstrap and apt, Apple's
container tool and its system service, and microsandbox's msb (on Linux with
/dev/kvm open for reading and writing, and a glibc its release runs on, which
it names). A tool newer than the releases
sealbench was checked against is refused (see --allow-untested-tool of run and
provision). For each thing missing it says why, and what to install or do.

doctor only looks; it changes nothing, and exits 0 whatever it finds (it
fails only if it cannot run at all).`,
		Example: `  sealbench doctor
  sudo sealbench doctor --json | jq '.targets[] | select(.ready)'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r := provision.Doctor(c.Context())
			if g.json {
				return writeJSON(g.stdout, r)
			}
			for _, ch := range r.Checks {
				mark := "ok  "
				if !ch.OK {
					mark = "NO  "
				}
				fmt.Fprintf(g.stdout, "%s%-18s %s\n", mark, ch.Name, ch.Detail)
				if !ch.OK && ch.Fix != "" {
					fmt.Fprintf(g.stdout, "    %-18s fix: %s\n", "", ch.Fix)
				}
			}
			fmt.Fprintln(g.stdout, "\ntargets:")
			for _, t := range r.Targets {
				state := "can run"
				if !t.Ready {
					state = "cannot run"
				}
				line := fmt.Sprintf("  %-13s %s", t.Target, state)
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
}
