//go:build linux

package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// Command is layerfsd's command tree, writing to stdout, for what
// describes it rather than runs it (the man pages make install writes).
func Command(stdout io.Writer) *cobra.Command { return newRoot(&globals{stdout: stdout}) }
