//go:build sealbench_bundle

package cmd

import "github.com/spf13/cobra"

const (
	bundledBuild = true
	buildNote    = `

This is the build of sealbench that ships inside a bundle: it links no signing
and no VM code, so it cannot seal or check signatures. Use the host's sealbench
for that.`
	versionNote = " (in-bundle build)"
)

func hostCommands(*global) []*cobra.Command { return nil }

func classifyHost(error) (int, string, bool) { return 0, "", false }
