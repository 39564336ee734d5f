package microsandbox

import (
	"context"
	"errors"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "a microsandbox microVM running the stand-in (msb)", Order: 50,
		New: func(o provision.NewOptions) (provision.Target, error) {
			return New(Options{Run: o.Run, Image: o.Image, CPUs: o.CPUs, MemoryBytes: o.MemoryBytes, Log: o.Log})
		},
		Backend: vmtarget.Backend{Target: Name, Spec: spec, Holder: holder{},
			Kinds: []manifests.ResourceKind{manifests.ResourceVM, manifests.ResourceImage}},
		Needs: []string{"msb"},
		Note:  "one msb microVM running the stand-in, its Engine reached through msb exec",
		Checks: func(ctx context.Context) []provision.Check {
			err := Check(ctx, "")
			fix := ""
			if errors.Is(err, ErrToolMissing) || errors.Is(err, ErrToolTooOld) {
				fix = "install microsandbox: curl -sSL https://get.microsandbox.dev | sh"
			}
			return []provision.Check{provision.ToolCheck("msb", err, fix)}
		},
	})
}
