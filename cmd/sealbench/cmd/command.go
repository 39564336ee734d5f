//go:build !sealbench_bundle

package cmd

import (
	"io"

	"github.com/spf13/cobra"
)

// Command is sealbench's command tree, writing to stdout and stderr, for
// what describes it rather than runs it (the man pages make install
// writes).
func Command(stdout, stderr io.Writer) *cobra.Command {
	return newRoot(&global{stdout: stdout, stderr: stderr})
}
