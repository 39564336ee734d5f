package microsandbox

import (
	"errors"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/internal/toolexec"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
)

func init() {
	vmtarget.Register(vmtarget.Registration{
		Name: Name, What: "a microsandbox microVM running the stand-in (msb)", Order: 50,
		Needs: append(hostNeeds(), "msb"), Note: "one msb microVM running the stand-in, its Engine reached through msb exec",
		Host: hostChecks,
		Spec: spec, Holder: holder{}, Kinds: []manifests.ResourceKind{manifests.ResourceVM, manifests.ResourceImage},
		CheckName: "msb", Check: Check,
		Fix: func(err error) string {
			switch {
			case errors.Is(err, ErrToolMissing), errors.Is(err, ErrToolTooOld):
				return "install microsandbox " + spec.Range() + ": " + getMsb
			case errors.Is(err, ErrToolUntested):
				return "install microsandbox " + spec.Range() + ", or pass " + toolexec.AllowUntestedFlag + " to run and provision"
			}
			return ""
		},
		Make: func(o vmtarget.Options) (provision.Target, error) { return New(Options{Options: o}) },
	})
}
