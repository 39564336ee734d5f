//go:build !sealbench_bundle

package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/vmimages"
)

func newSealCmd(g *global) *cobra.Command {
	var key, out, source, imageArch string
	var noImage bool
	var suiteDirs []string
	var debs debSettings
	c := &cobra.Command{
		Use:   "seal",
		Short: "Build a reproducible, signed bundle from the source tree",
		Long: `Build every binary the bundle ships for linux/amd64 and linux/arm64
(CGO_ENABLED=0, -trimpath, -buildvcs=false, empty build id), copy the cell
bodies and every built-in suite (suites/NAME/; --suite-dir seals a suite of
your own too, checked first: docs/suites.md), write manifest.json, SHA256SUMS and manifest.sig (signed with --key),
and write the bundle directory build-linux-<hash> and its deterministic tar into
--out. Then build the Sandbox image (see ` + "`sealbench image`" + `) into
build-linux-<hash>.image/, unless --no-image. Every mtime is SOURCE_DATE_EPOCH, or the commit time. Sealing the same
commit twice gives a byte-identical bundle with the same name.

Last, seal writes build-linux-<hash>.sigstore.json beside the bundle (never
inside it): a Sigstore bundle (v0.3, DSSE) signed with the same key, holding an
in-toto Statement whose subjects are every file of the bundle (manifest.json,
manifest.sig and SHA256SUMS among them), the tar and the Sandbox image's config
digest, with an SLSA provenance v1 predicate: the builder, the build type, the
source commit and dirty flag, the Go version, the build flags, the Debian
package lock of the image, and the build's start and end. manifest.sig stays
for older verifiers. cosign verifies it offline:
  cosign verify-blob-attestation --new-bundle-format --key sealbench.pub \
    --bundle build-linux-<hash>.sigstore.json --type slsaprovenance1 \
    --trusted-root empty-trusted-root.json --insecure-ignore-tlog=true \
    build-linux-<hash>/manifest.json
(see SECURITY.md for the empty trusted root, Rekor and keyless signing).

A dirty tree (uncommitted changes or untracked files) is sealed too, but marked
dirty in the manifest, and warned about.

A seal that is stopped leaves nothing behind: its go command, the compilers
that starts and its other children run in a process group that dies with it
(Ctrl-C, SIGTERM, and on Linux kill -9 too), and all it writes before the
bundle is whole lies in --out/.sealbench-seal-<random>, which the next seal in
the same --out removes (never a live seal's).

A --source that is not a sealbench tree (its go.mod another module's, or no
go.mod), an --out that is not a directory or lies inside the cell bodies, a
--key that is missing or not a regular file (a fifo is refused, never waited
on), and an --image-arch with no lock are refused (exit 3) before anything is
built or created.`,
		Example: `  SEALBENCH_PASSWORD= sealbench seal --out out
  SEALBENCH_PASSWORD= sealbench seal --key ./keys/sealbench.key --out /tmp/bundles --json
  SOURCE_DATE_EPOCH=1700000000 SEALBENCH_PASSWORD= sealbench seal --source ~/src/sealbench`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkSealArgs(source, out, imageArch, noImage); err != nil {
				return err
			}
			if err := debs.check(); err != nil {
				return err
			}
			for _, d := range suiteDirs {
				if _, err := loadSuiteDir(d); err != nil {
					return err
				}
			}
			if _, err := os.Stat(key); errors.Is(err, fs.ErrNotExist) {
				return usageErrorf("create a key pair with `sealbench keygen`, or pass --key", "no signing key at %s", key)
			}
			pw, err := readPassword(g, false)
			if err != nil {
				return err
			}
			signer, err := sign.LoadPrivateKey(key, pw)
			if err != nil {
				return err
			}
			p := newProgress(g.stderr, "seal")
			defer p.Close()
			start := time.Now()
			g.outputs.Makes(out)
			res, err := bundle.Seal(c.Context(), bundle.SealOptions{
				Source: source, OutDir: out, SuiteDirs: suiteDirs, Signer: signer, Log: p.Logf,
			})
			if err != nil {
				return err
			}
			g.outputs.Made(res.Dir, res.Tar, res.Dir+".image")
			sealed := struct {
				*bundle.SealResult
				Image       *vmimages.ImageInfo `json:"image,omitempty"`
				Attestation string              `json:"attestation"`
			}{SealResult: res}
			if !noImage {
				sealed.Image, err = orchestrate.BuildSandboxImage(c.Context(), res.Dir, res.Manifest, res.Dir+".image", imageArch, vmimages.VariantSandbox, "", debs.options(), p.Logf)
				if err != nil {
					return fmt.Errorf("sealed %s, but building its Sandbox image failed: %w", res.Name, err)
				}
			}
			// The provenance is signed last: it names the image too, and
			// the build's end.
			sealed.Attestation, err = orchestrate.AttestSeal(res, sealed.Image, signer, start, time.Now())
			if err != nil {
				return fmt.Errorf("sealed %s, but signing its provenance failed: %w", res.Name, err)
			}
			g.outputs.Made(sealed.Attestation)
			p.Close()
			if g.json {
				return writeJSON(g.stdout, sealed)
			}
			dirty := ""
			if res.Source.Dirty {
				dirty = " (dirty)"
			}
			fmt.Fprintf(g.stdout, "sealed %s: %d files, %s, in %.1fs\n", res.Name, res.Files, humanBytes(res.Bytes), res.Elapsed.Seconds())
			fmt.Fprintf(g.stdout, "  directory %s\n  tar       %s (%s)\n  manifest  %s\n  source    %s %s%s\n",
				res.Dir, res.Tar, res.TarDigest, res.ManifestDigest, res.Source.Module, res.Source.Version, dirty)
			if img := sealed.Image; img != nil {
				fmt.Fprintf(g.stdout, "  image     %s (%s, id %s)\n", img.Tar, img.Arch, img.ID)
				if img.Relock != nil {
					fmt.Fprintf(g.stdout, "  lock      %s (FRESH: the committed lock's packages are in no source; the id differs from the committed one)\n", img.Lock)
				}
			}
			fmt.Fprintf(g.stdout, "  attested  %s (SLSA provenance v1, Sigstore bundle)\n", sealed.Attestation)
			return nil
		},
	}
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PrivateKeyFile), "encrypted private key to sign the manifest with")
	c.Flags().StringVar(&out, "out", "out", "directory to write the bundle and its tar into")
	c.Flags().BoolVar(&noImage, "no-image", false, "do not build the Sandbox image next to the bundle")
	debs.flags(c.Flags())
	c.Flags().StringVar(&imageArch, "image-arch", "amd64", "Debian architecture of the Sandbox image: amd64 or arm64")
	c.Flags().StringSliceVar(&suiteDirs, "suite-dir", nil, "a suite of your own to seal in too: a directory with suite.json and its scripts (docs/suites.md)")
	c.Flags().StringVar(&source, "source", "", "sealbench source tree to seal (default: the one around the working directory)")
	return c
}

// checkSealArgs refuses, before anything is built, a source that is not
// a sealbench tree, an --out that is a file or inside the cell bodies
// seal reads, and an image architecture no lock exists for.
func checkSealArgs(source, out, imageArch string, noImage bool) error {
	root, err := bundle.SourceRoot(source)
	if err != nil {
		return err
	}
	if err := checkOutDir("--out", out, "pass the directory to write the bundle into (default out)"); err != nil {
		return err
	}
	if cells := filepath.Join(root, bundle.CellsSourceDir); within(out, cells) {
		return usageErrorf("pass an --out outside the source's "+bundle.CellsSourceDir+"/ (default out)", "--out %s is inside %s, whose files seal puts in the bundle", out, cells)
	}
	if !noImage && !slices.Contains(vmimages.Arches, imageArch) {
		return usageErrorf("--image-arch takes "+strings.Join(vmimages.Arches, " or ")+"; or pass --no-image", "no Sandbox image for architecture %q", imageArch)
	}
	return nil
}

func humanBytes(n int64) string { return orchestrate.HumanBytes(n) }
