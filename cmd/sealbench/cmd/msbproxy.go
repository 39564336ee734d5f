//go:build !sealbench_bundle

package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/provision/microsandbox"
)

// newMsbProxyCmd is the microsandbox target's Engine proxy: a background
// process of the run (recorded in its ledger before it starts) that
// serves a unix socket on the host and carries each connection through
// `msb exec NAME --no-tty -- standin dial`. Hidden: only the microsandbox
// provisioner starts it.
func newMsbProxyCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:                microsandbox.ProxySubcommand + " --socket S --tool MSB --name N --standin P --guest-socket G",
		Short:              "Serve the microsandbox target's Engine socket through msb exec (started by provision)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := microsandbox.ParseProxyArgs(args)
			if err != nil {
				return usageErrorf("this command is started by `sealbench provision microsandbox`", "%v", err)
			}
			p := newProgress(g.stderr, microsandbox.ProxySubcommand)
			defer p.Close()
			return microsandbox.ServeProxy(c.Context(), cfg, p.Logf)
		},
	}
}
