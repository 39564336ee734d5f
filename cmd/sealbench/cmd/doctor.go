//go:build !sealbench_bundle

package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/apple"
	"github.com/sealbench/sealbench/provision/microsandbox"
)

func newDoctorCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what this host can run, and for what it cannot, why and what to install",
		Long: `Look at this host and say which targets can run here: root, /dev/fuse,
FUSE passthrough in the kernel, the dockerd at DOCKER_HOST (or the default
socket), qemu-system-x86_64 and whether KVM is usable (it asks /dev/kvm for its
API version; it never starts a guest), limactl, mmdebstrap and apt, Apple's
container tool and its system service, and microsandbox's msb. For each
thing missing it says why, and what to install or do.

doctor only looks; it changes nothing, and exits 0 whatever it finds (it
fails only if it cannot run at all).`,
		Example: `  sealbench doctor
  sudo sealbench doctor --json | jq '.targets[] | select(.ready)'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r := provision.Doctor(c.Context(), "",
				toolCheck(c.Context(), "apple-container", apple.Check, apple.ErrToolMissing, apple.ErrToolTooOld, apple.ErrNotRunning,
					"install Apple's container (0.6 or newer) from https://github.com/apple/container/releases",
					"then `container system start --enable-kernel-install`"),
				toolCheck(c.Context(), "msb", microsandbox.Check, microsandbox.ErrToolMissing, microsandbox.ErrToolTooOld, nil,
					"install microsandbox: curl -sSL https://get.microsandbox.dev | sh", ""))
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

// toolCheck runs a VM target's tool check (apple.Check, microsandbox.Check)
// as one of the doctor's checks, with the fix its error calls for.
func toolCheck(ctx context.Context, name string, check func(context.Context, string) error, missing, old, notRunning error, install, start string) provision.Check {
	err := check(ctx, "")
	if err == nil {
		return provision.Check{Name: name, OK: true, Detail: "installed and answering"}
	}
	c := provision.Check{Name: name, Detail: err.Error()}
	switch {
	case errors.Is(err, missing), errors.Is(err, old):
		c.Fix = install
	case notRunning != nil && errors.Is(err, notRunning):
		c.Fix = start
	}
	return c
}
