package apple

import (
	"context"
	"errors"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
)

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "an Apple container VM running the stand-in (macOS on Apple silicon)", Order: 40,
		New: func(o provision.NewOptions) (provision.Target, error) {
			return New(Options{Run: o.Run, Image: o.Image, CPUs: o.CPUs, MemoryBytes: o.MemoryBytes, Log: o.Log})
		},
		Backend: vmtarget.Backend{Target: Name, Spec: spec, Holder: holder{},
			Kinds: []manifests.ResourceKind{manifests.ResourceVM, manifests.ResourceImage, manifests.ResourceVolume}},
		Needs: []string{"macos-arm64", "apple-container"},
		Note:  "one Apple container VM running the stand-in",
		Checks: func(ctx context.Context) []provision.Check {
			err := Check(ctx, "")
			fix := ""
			switch {
			case errors.Is(err, ErrToolMissing), errors.Is(err, ErrToolTooOld):
				fix = "install Apple's container (0.6 or newer) from https://github.com/apple/container/releases"
			case errors.Is(err, ErrNotRunning):
				fix = "then `container system start --enable-kernel-install`"
			}
			return []provision.Check{provision.ToolCheck("apple-container", err, fix)}
		},
	})
}
