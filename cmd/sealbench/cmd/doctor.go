//go:build !sealbench_bundle

package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision"
)

func newDoctorCmd(g *global) *cobra.Command {
	var sc scope
	c := &cobra.Command{
		Use:   "doctor [--target T,...]",
		Short: "Say what this host can run, and for what it cannot, why and what to install",
		Long: `Look at this host and say which targets can run here: root, /dev/fuse,
FUSE passthrough, FUSE over io_uring (optional), whether a memory balloon
reports free pages to a hypervisor, and whether an ext4 filesystem is mounted
without a journal (each a warning, with what the protocol does about it), then
each target's own checks (its tools and services, with what to
install; a tool newer than the releases sealbench was checked against is
refused unless --allow-untested-tool). For each thing missing it says why, and
what to do.

--target lists only those targets. A target on a remote host
(KIND@ssh://USER@HOST[:PORT]) is looked at over SSH, each host once: that it
can be reached (known_hosts, keys only, nothing prompts), its kernel, whether
you log in as root, and what the target needs there.

doctor only looks; it changes nothing, and exits 0 whatever it finds (it
fails only if it cannot run at all, or on a --target it cannot parse).
docs/targets.md says what each target needs.`,
		Example: `  sealbench doctor
  sudo sealbench doctor --json | jq '.targets[] | select(.ready)'
  sealbench doctor --target ` + remoteExample() + ` --ssh-identity ~/.ssh/bench_ed25519`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := sc.check(); err != nil {
				return err
			}
			r, err := orchestrate.Doctor(c.Context(), orchestrate.DoctorOptions{Targets: sc.targets(), SSH: sc.ssh.options()})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, r)
			}
			where := ""
			for _, ch := range r.Checks {
				if ch.Host != where {
					fmt.Fprintf(g.stdout, "\non %s:\n", cliutil.Printable(ch.Host))
					where = ch.Host
				}
				mark := "ok"
				switch {
				case !ch.OK:
					mark = "NO"
				case ch.Warning != "":
					mark = "warn"
				}
				fmt.Fprintf(g.stdout, "%-5s%-18s %s\n", mark, ch.Name, cliutil.Printable(ch.Detail)) // a tool's own words
				if !ch.OK && ch.Fix != "" {
					fmt.Fprintf(g.stdout, "     %-18s fix: %s\n", "", cliutil.Printable(ch.Fix))
				}
				if ch.Warning != "" {
					fmt.Fprintf(g.stdout, "     %-18s note: %s\n", "", cliutil.Printable(ch.Warning))
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
				fmt.Fprintln(g.stdout, cliutil.Printable(line))
			}
			return nil
		},
	}
	sc.flags(c.Flags(), provision.CommandDoctor, "look only at these targets, comma-separated; KIND@ssh://USER@HOST[:PORT] looks at that host over SSH")
	return c
}
