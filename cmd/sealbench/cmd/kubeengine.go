//go:build !sealbench_bundle

package cmd

import (
	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/provision/kubernetes"
)

// newKubeEngineCmd is the kubernetes target's kube-engine: a background
// process of the run (recorded in its ledger before it starts) that
// serves, on a unix socket in the run directory, the Engine API calls
// sealbench makes, a container being a pod of the cluster and an exec
// the pod's exec subresource. Hidden: only the kubernetes provisioner
// starts it.
func newKubeEngineCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:                kubernetes.EngineSubcommand + " --socket S --namespace NS --node N --run ID [--kubeconfig F] [--context C] [--runtime-class RC] [--fuse-resource R] [--containerd SOCK]",
		Short:              "Serve the kubernetes target's Engine socket in front of a cluster (started by provision)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := kubeengine.ParseArgs(args)
			if err != nil {
				return usageErrorf("this command is started by `sealbench provision --target kubernetes`", "%v", err)
			}
			return kubeengine.Serve(c.Context(), cfg)
		},
	}
}
