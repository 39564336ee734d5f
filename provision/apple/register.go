package apple

import (
	"errors"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
)

func init() {
	vmtarget.Register(vmtarget.Registration{
		Name: Name, What: "an Apple container VM running the stand-in (macOS on Apple silicon)", Order: 40,
		Needs: []string{"macos-arm64", "apple-container"}, Note: "one Apple container VM running the stand-in",
		Spec: spec, Holder: holder{}, Kinds: []manifests.ResourceKind{manifests.ResourceVM, manifests.ResourceImage, manifests.ResourceVolume},
		CheckName: "apple-container", Check: Check,
		Fix: func(err error) string {
			switch {
			case errors.Is(err, ErrToolMissing), errors.Is(err, ErrToolTooOld):
				return "install Apple's container (0.6 or newer) from https://github.com/apple/container/releases"
			case errors.Is(err, ErrNotRunning):
				return "then `container system start --enable-kernel-install`"
			}
			return ""
		},
		Make: func(o vmtarget.Options) (provision.Target, error) { return New(Options{Options: o}) },
	})
}
