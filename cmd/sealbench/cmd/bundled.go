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

func classifyHost(error) (int, string, bool) { return 0, "", false }
