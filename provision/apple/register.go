package apple

import (
	"context"
	"errors"
	"runtime"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
)

func init() {
	vmtarget.Register(vmtarget.Registration{
		Name: Name, What: "an Apple container VM running the stand-in (macOS on Apple silicon)", Order: 40,
		Needs: []string{"macos-arm64", "apple-container"}, Note: "one Apple container VM running the stand-in",
		Spec: spec, Holder: holder{}, Kinds: []manifests.ResourceKind{manifests.ResourceVM, manifests.ResourceImage, manifests.ResourceVolume},
		Host: func(context.Context) []provision.Check {
			if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
				return []provision.Check{{Name: "macos-arm64", OK: true, Detail: "macOS on Apple silicon"}}
			}
			return []provision.Check{{Name: "macos-arm64", Detail: "this host is " + runtime.GOOS + "/" + runtime.GOARCH, Fix: "Apple's container runs only on macOS on Apple silicon"}}
		},
		CheckName: "apple-container", Check: Check,
		Fix: func(err error) string {
			switch {
			case errors.Is(err, ErrToolMissing), errors.Is(err, ErrToolTooOld):
				return "install Apple's container " + spec.Range() + " from " + releases
			case errors.Is(err, ErrToolUntested):
				return "install Apple's container " + spec.Range() + " from " + releases + ", or pass " + toolexec.AllowUntestedFlag + " to run and provision"
			case errors.Is(err, ErrNotRunning):
				return "then `container system start --enable-kernel-install`"
			}
			return ""
		},
		Make: func(o vmtarget.Options) (provision.Target, error) { return New(Options{Options: o}) },
		Help: `One VM from the Sandbox image, running the stand-in, its socket published
to the host. Drives only the releases of container whose sources it was
checked against: a newer one is refused unless --allow-untested-tool.`,
		Examples: []string{
			"  sealbench provision apple --bundle out/build-linux-0123456789ab --vm-cpus 4 --vm-memory 4096   # on a Mac",
		},
	})
}
