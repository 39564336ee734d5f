//go:build !sealbench_bundle

package cmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/ociartifact"
	"github.com/sealbench/sealbench/orchestrate"
)

func newVerifyCmd(g *global) *cobra.Command {
	var bundlePath, key, expect string
	var insecure bool
	c := &cobra.Command{
		Use:   "verify --bundle DIR|TAR|oci://REF",
		Short: "Check a bundle's signature, then every file",
		Long: `Check the signature of the bundle's manifest with --key first, trusting nothing
in the manifest before it verifies; then every file: present, a regular file,
the same size, mode and SHA-256, read no further than its declared size; and no
file, symlink, device or directory that the manifest does not list. Works on a
bundle directory and on its tar. Every difference is listed, each naming the
file and what differs. The bundle may also be given as the one argument
(verify BUNDLE).

When build-linux-<hash>.sigstore.json lies beside the bundle (seal writes it),
verify checks it too, after the files: its signature with the same key
(sigstore-go, the key the only trusted material, offline), then every subject:
each file of the bundle against the verified manifest (manifest.json,
manifest.sig and SHA256SUMS against their bytes), exactly the same set, and the
tar against its bytes when it is at hand. It says which it checked: manifest.sig
alone, or manifest.sig and the Sigstore bundle. A Sigstore bundle that does
not verify with the key exits 2; a subject that differs exits 1.

--bundle oci://REGISTRY/REPO[:TAG|@DIGEST] (as sealbench push prints it) pulls
the bundle first: a tag is resolved to a digest once, and the artifact is
fetched by that digest into ~/.cache/sealbench/bundles/sha256-<hex>/, its
Sigstore bundle (an attached referrer) beside it; then it is verified exactly
as a local bundle, with the same key. The registry is not trusted: it is
where the bytes come from, the key is what they are checked with. The Sandbox
image the artifact names must also be the one the signed provenance names.

--key must be a regular file (a symlink to one is fine): a fifo, a device or a
directory is refused at once (exit 3), never waited on; a missing key exits 2.`,
		Example: `  sealbench verify --bundle out/build-linux-0123456789ab
  sealbench verify --bundle out/build-linux-0123456789ab.tar --key ./keys/sealbench.pub
  sealbench verify --bundle out/build-linux-0123456789ab --json; echo "exit $?"
  sealbench verify --bundle /mnt/usb/bundle.tar --id build-linux-0123456789ab   # refuse any other bundle
  sealbench verify --bundle oci://registry.example.com/bench/bundle:v1 --key ./keys/sealbench.pub`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				// As a user types it: verify BUNDLE.
				if bundlePath != "" && bundlePath != args[0] {
					return usageErrorf("pass the bundle once: verify BUNDLE, or verify --bundle BUNDLE", "two bundles given: --bundle %s and %s", bundlePath, args[0])
				}
				bundlePath = args[0]
			}
			if bundlePath == "" {
				return usageErrorf("pass --bundle out/build-linux-<hash> (or its .tar)", "--bundle is required")
			}
			v, err := loadVerifier(key)
			if err != nil {
				return err
			}
			if err := orchestrate.CheckBundleArgs("", expect, ""); err != nil {
				return err
			}
			var pulled *ociartifact.Pulled
			if ociartifact.IsRef(bundlePath) {
				p := newProgress(g.stderr, "verify")
				pulled, err = orchestrate.PullBundle(c.Context(), bundlePath, insecure, p.Logf)
				p.Close()
				if err != nil {
					return err
				}
				bundlePath = pulled.Dir
			}
			res, err := bundle.Verify(c.Context(), bundlePath, bundle.VerifyOptions{Verifier: v, Expect: expect})
			if err != nil {
				var ce *bundle.ContentError
				if errors.As(err, &ce) {
					if pulled != nil {
						ce.Bundle = pulled.Reference + " (pulled into " + ce.Bundle + ")"
					}
					return &problemsError{ce}
				}
				return err
			}
			// Then the Sigstore bundle beside it, when there is one.
			att, err := orchestrate.VerifyAttestation(bundlePath, res, v)
			checked := []string{manifests.SignatureFile}
			switch {
			case errors.Is(err, orchestrate.ErrNoAttestation):
				att = nil
			case err != nil:
				var ce *bundle.ContentError
				if errors.As(err, &ce) {
					return &problemsError{ce}
				}
				return err
			default:
				checked = append(checked, filepath.Base(att.Path))
			}
			imageChecked := false
			if pulled != nil {
				// The Sandbox image the artifact names must be the one the
				// signed provenance names.
				if imageChecked, err = orchestrate.CheckPulledImage(pulled, att); err != nil {
					var ce *bundle.ContentError
					if errors.As(err, &ce) {
						return &problemsError{ce}
					}
					return err
				}
				if imageChecked {
					att.Checked++
					att.Unchecked = slices.DeleteFunc(att.Unchecked, func(s string) bool { return s == att.Image.Ref })
				}
			}
			if g.json {
				out := map[string]any{
					"verified": true, "name": res.Name, "path": res.Path, "manifestDigest": res.ManifestDigest,
					"files": res.Files, "bytes": res.Bytes, "keyId": v.KeyID(),
					"source": res.Manifest.Source, "checked": checked, "attestation": att,
				}
				if pulled != nil {
					out["pulled"], out["imageChecked"] = pulled, imageChecked
				}
				return writeJSON(g.stdout, out)
			}
			dirty := ""
			if res.Manifest.Source.Dirty {
				dirty = ", sealed from a DIRTY tree"
			}
			fmt.Fprintf(g.stdout, "verified %s: signature by key %s, %d files, %s%s\n", res.Name, v.KeyID(), res.Files, humanBytes(res.Bytes), dirty)
			if att == nil {
				where := "beside the bundle"
				if pulled != nil {
					where = "attached to it"
				}
				fmt.Fprintf(g.stdout, "  checked %s; no %s %s, so no attestation was checked\n", manifests.SignatureFile, filepath.Base(orchestrate.AttestationPath(bundlePath)), where)
			} else {
				fmt.Fprintf(g.stdout, "  checked %s and %s: SLSA provenance v1, %d subjects, %d matched here", manifests.SignatureFile, filepath.Base(att.Path), att.Subjects, att.Checked)
				if len(att.Unchecked) > 0 {
					fmt.Fprintf(g.stdout, ", not here to check: %s", strings.Join(att.Unchecked, ", "))
				}
				fmt.Fprintln(g.stdout)
			}
			if pulled != nil {
				cached := ""
				if pulled.Cached {
					cached = ", from the cache"
				}
				fmt.Fprintf(g.stdout, "  pulled %s as %s%s into %s\n", pulled.Ref, pulled.Digest, cached, pulled.Dir)
				switch {
				case imageChecked:
					fmt.Fprintf(g.stdout, "  the Sandbox image it names, %s, is the one the signed provenance names\n", pulled.ImageID)
				case pulled.Image != "":
					fmt.Fprintf(g.stdout, "  the Sandbox image it names, %s, is named by no signed provenance: a run builds the image from the bundle instead\n", pulled.ImageID)
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&bundlePath, "bundle", "", "bundle directory or tar to verify, or oci://REGISTRY/REPO[:TAG|@DIGEST] to pull it from (required)")
	c.Flags().BoolVar(&insecure, "insecure", false, "with --bundle oci://: allow plain HTTP to a registry that is not on loopback")
	c.Flags().StringVar(&expect, "id", "", "pin the bundle: refuse a validly signed bundle with another name (build-linux-<hash>)")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to check the signature with")
	return c
}

// problemsError carries a ContentError's problem list into --json output.
type problemsError struct{ *bundle.ContentError }

func (e *problemsError) Unwrap() error { return e.ContentError }

func (e *problemsError) JSONDetail() (string, any) { return "problems", e.Problems }

// loadVerifier loads the public key to verify bundles with (orchestrate.LoadVerifier).
func loadVerifier(key string) (*sign.Verifier, error) { return orchestrate.LoadVerifier(key) }
