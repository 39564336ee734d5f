package microsandbox

import (
	"context"
	"errors"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
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
		Make:        func(o vmtarget.Options) (provision.Target, error) { return New(Options{Options: o}) },
		Subcommands: []provision.Subcommand{proxySubcommand},
		Help: `One msb microVM from the Sandbox image, running the stand-in, reached
through msb exec by a proxy process of the run. Drives only the releases of
msb whose sources it was checked against: a newer one is refused unless
--allow-untested-tool.`,
	})
}

// proxySubcommand serves the target's Engine socket through msb exec: a
// background process of the run (recorded in its ledger before it starts)
// that carries each connection to the stand-in in the microVM over `msb
// exec NAME --no-tty -- standin dial`.
var proxySubcommand = provision.Subcommand{
	Name: ProxySubcommand, Usage: "--socket S --tool MSB --name N --standin P --guest-socket G",
	Short: "Serve the microsandbox target's Engine socket through msb exec (started by provision)",
	Run: func(ctx context.Context, args []string, logf func(string, ...any)) error {
		cfg, err := ParseProxyArgs(args)
		if err != nil {
			return &provision.UsageError{Err: err, Hint: "this command is started by `sealbench provision microsandbox`"}
		}
		return ServeProxy(ctx, cfg, logf)
	},
}
