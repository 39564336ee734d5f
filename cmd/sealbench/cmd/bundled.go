//go:build sealbench_bundle

package cmd

import "github.com/spf13/cobra"

const (
	bundledBuild = true
	buildNote    = `

This is the build of sealbench that ships inside a bundle, the runner: it takes
a run's samples from the plan the host's sealbench writes (sample), and links
no signing and no VM code, so it cannot seal, check signatures or provision.
Use the host's sealbench for that.`
	versionNote = " (in-bundle build)"
)

func hostCommands(*global) []*cobra.Command { return nil }

// completeValues is the host build's: this build has no shell completion.
func completeValues(*cobra.Command) {}

// mainExample is the root's first example: this build runs no job.
func mainExample() string {
	return "  # This build takes samples from a plan; the host's sealbench runs the job.\n  sealbench sample --plan PLAN"
}

func classifyHost(error) (int, string, bool) { return 0, "", false }
