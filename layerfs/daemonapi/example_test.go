package daemonapi_test

import (
	"errors"
	"fmt"

	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// The runner mounts a Workspace inside a Sandbox through a shell, where $L is
// the bundle's layerfsd, and reads the answer strictly.
func Example() {
	mount := daemonapi.MountCmd{Store: "/w/store", OverlayDir: "/w/scratch", Workspace: "/w/ws2", Control: "/w/ctl2"}
	fmt.Println("$L " + daemonapi.Shell(mount))

	stdout := []byte(`{"pid": 42, "store": "/w/store", "workspace": "/w/ws2", "control": "/w/ctl2", "mountNs": 1500000,
		"features": {"transport": "uring"}}`)
	ready, err := daemonapi.DecodeReady(stdout)
	fmt.Println(ready.MountNs, ready.Features.Transport, err)

	// A failure comes back as layerfsd's own document, with its exit code.
	_, err = daemonapi.DecodeCommit([]byte(`{"error": "daemon at \"/w/ctl2\": no space left on device", "exitCode": 1}`))
	var e *daemonapi.Error
	fmt.Println(errors.As(err, &e), e.ExitCode)
	// Output:
	// $L mount --store /w/store --workspace /w/ws2 --control /w/ctl2 --overlay-dir /w/scratch --json
	// 1500000 uring <nil>
	// true 1
}
