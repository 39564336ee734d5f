//go:build !sealbench_bundle

package cmd

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
)

// The host build has every command; the build that ships inside a bundle
// (tag sealbench_bundle) leaves out the ones that link signing or VM code.
const (
	bundledBuild = false
	buildNote    = ""
	versionNote  = ""
)

func hostCommands(g *global) []*cobra.Command {
	return append([]*cobra.Command{newKeygenCmd(g), newSealCmd(g), newVerifyCmd(g), newImageCmd(g), newReportCmd(g),
		newProvisionCmd(g), newTeardownCmd(g), newAuditCmd(g), newDoctorCmd(g), newRunCmd(g), newSuitesCmd(g), newPushCmd(g)}, newTargetSubcommands(g)...)
}

// mainExample is the root's first example: the main job, as the first
// registered target shows it.
func mainExample() string {
	return firstExample("run") + "\n  # (with no --bundle, run seals the source tree around you with a throw-away key)"
}

func classifyHost(err error) (int, string, bool) {
	var ce *bundle.ContentError
	var ie *provision.InputError
	var te *bundle.TarError
	switch {
	case errors.As(err, &ie):
		return ExitUnusable, ie.Hint, true
	case errors.As(err, &te):
		return ExitUnusable, te.Hint(), true
	case errors.Is(err, bundle.ErrNotSource):
		return ExitUnusable, "run seal inside a sealbench checkout, or pass --source DIR (the directory holding its go.mod)", true
	case errors.As(err, &ce):
		return ExitMismatch, "the bundle was changed after it was sealed: do not use it; seal again or fetch a clean copy", true
	case errors.Is(err, bundle.ErrNotPinned):
		return ExitSignature, "check --id: this bundle is validly signed but is not the one you pinned", true
	case errors.Is(err, bundle.ErrSignature):
		return ExitSignature, "check --key names the public key of whoever sealed the bundle", true
	case errors.Is(err, sign.ErrKey):
		return ExitUnusable, "check --key: seal takes the private key (sealbench.key), the others the public key (sealbench.pub); `sealbench keygen` makes a pair", true
	case errors.Is(err, atomicfile.ErrNotRegular):
		return ExitUnusable, "name a regular file or a new path; sealbench never writes over a symlink, fifo or device it was not asked to stream into", true
	case errors.Is(err, manifests.ErrNotRegular):
		return ExitUnusable, "name a regular file: sealbench reads keys, plans, locks and results only from regular files", true
	case errors.Is(err, bundle.ErrUnusable):
		return ExitUnusable, "--bundle takes a bundle directory (build-linux-<hash>), as seal wrote it; only verify also takes its .tar", true
	}
	return 0, "", false
}
