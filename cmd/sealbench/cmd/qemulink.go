//go:build !sealbench_bundle

package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/provision/qemu"
)

// newQEMULinkCmd is the qemu target's link: a background process of the
// run (recorded in its ledger before it starts) that serves the Engine
// socket on the host and carries each connection to the stand-in in the
// VM as a stream over its virtio-serial port. Hidden: only the qemu
// provisioner starts it.
func newQEMULinkCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:                qemu.LinkSubcommand + " --socket S --serial P",
		Short:              "Serve the qemu target's Engine socket over the VM's serial port (started by provision)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := qemu.ParseLinkArgs(args)
			if err != nil {
				return usageErrorf("this command is started by `sealbench provision qemu`", "%v", err)
			}
			p := newProgress(g.stderr, qemu.LinkSubcommand)
			defer p.Close()
			return qemu.ServeLink(c.Context(), cfg, p.Logf)
		},
	}
}
