//go:build linux

package layerfs

import "os/exec"

var (
	execLookPath = exec.LookPath
	execCommand  = exec.Command
)
