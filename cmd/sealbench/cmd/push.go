//go:build !sealbench_bundle

package cmd

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/orchestrate"
)

func newPushCmd(g *global) *cobra.Command {
	var bundlePath, results, key string
	var insecure bool
	c := &cobra.Command{
		Use:   "push --bundle DIR|TAR | --results RUN  oci://REGISTRY/REPOSITORY[:TAG]",
		Short: "Publish a bundle (or a run's results) to an OCI registry, signed",
		Long: `Publish a sealed bundle as an OCI artifact (artifact type
application/vnd.sealbench.bundle.v1), after verifying it, and the Sigstore bundle
beside it, with --key: nothing that does not verify is published.

Each file of the bundle is one layer, its bytes as they are, its path in the
org.opencontainers.image.title annotation: a layer's digest is the SHA-256 the
signed manifest records for the file, so a file two bundles share (a cell body,
a binary whose code did not change) is stored once, and a generic client (oras) sees each
file under its own name. manifest.sig and <bundle>.sigstore.json are attached
as OCI 1.1 referrers (subject: the artifact), and, for registries without the
referrers API (distribution 2.8 among them), listed in the referrers tag
schema's index (tag sha256-<hex>), where cosign, oras and crane look. The
Sandbox image beside the bundle (<bundle>.image/, as seal writes it) is pushed
into the same repository by digest, named in the artifact's annotations and
tagged sha256-<hex of the artifact>.sandbox. Pushing the same bundle again
writes nothing new and prints the same digest.

Prints the artifact's reference by digest: what verify, run, provision and
image take as --bundle. A registry is availability, not integrity: whoever
pulls verifies with the key.

--results RUN publishes a run's results instead (artifact type
application/vnd.sealbench.results.v1): samples.jsonl, pins.json and the reports
beside them, one layer each, with results.sigstore.json (run --sign-key)
attached as a referrer. report takes the reference it prints, as a run
directory: report oci://... --require-signed --key PUB checks the signature.

Credentials come from ~/.docker/config.json and its credential helpers (docker
login). Plain HTTP is used only for a registry on loopback, or with --insecure.`,
		Example: `  sealbench push --bundle out/build-linux-0123456789ab oci://localhost:5000/bench/bundle:v1
  sealbench push --bundle /mnt/usb/build-linux-0123456789ab.tar oci://registry.example.com/bench/bundle:v1 --json
  sealbench push --bundle out/build-linux-0123456789ab oci://10.0.0.5:5000/bench/bundle:v1 --insecure
  sealbench push --results out/runs/run-20261206T101500Z oci://registry.example.com/bench/results:2026-12-06
  sealbench report oci://registry.example.com/bench/results:2026-12-06 --require-signed --key sealbench.pub
  # then, anywhere:
  sealbench verify --bundle oci://registry.example.com/bench/bundle:v1 --key sealbench.pub
  skopeo inspect --raw docker://registry.example.com/bench/bundle:v1
  # a Kubernetes node pulls the Sandbox image itself (the image push printed, without oci://):
  sealbench run --target kubernetes --bundle oci://registry.example.com/bench/bundle:v1 \
    --kube-image registry.example.com/bench/bundle@sha256:<the Sandbox image's digest>`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case bundlePath == "" && results == "":
				return usageErrorf("pass --bundle out/build-linux-<hash> (or its .tar), or --results out/runs/<run id>", "--bundle or --results is required")
			case bundlePath != "" && results != "":
				return usageErrorf("push one thing at a time", "pass --bundle or --results, not both")
			}
			p := newProgress(g.stderr, "push")
			defer p.Close()
			if results != "" {
				pushed, err := orchestrate.PushResults(c.Context(), results, args[0], insecure, p.Logf)
				p.Close()
				if err != nil {
					return err
				}
				if g.json {
					return writeJSON(g.stdout, pushed)
				}
				signed := "unsigned"
				if len(pushed.Referrers) > 0 {
					signed = "its signature attached"
				}
				fmt.Fprintf(g.stdout, "pushed the results of %s: %s\n  %d files, %s; %s\n", results, pushed.Reference, pushed.Layers, humanBytes(pushed.Bytes), signed)
				return nil
			}
			pushed, err := orchestrate.PushBundle(c.Context(), orchestrate.PushOptions{
				Bundle: bundlePath, Ref: args[0], Insecure: insecure, Key: key, Log: p.Logf,
			})
			p.Close()
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, pushed)
			}
			fmt.Fprintf(g.stdout, "pushed %s: %s\n", pushed.Bundle, pushed.Reference)
			fmt.Fprintf(g.stdout, "  %d layers, %s; referrers: %d (manifest.sig", pushed.Layers, humanBytes(pushed.Bytes), len(pushed.Referrers))
			if len(pushed.Referrers) > 1 {
				fmt.Fprint(g.stdout, ", the Sigstore bundle")
			}
			fmt.Fprintln(g.stdout, ")")
			if pushed.Image != "" {
				fmt.Fprintf(g.stdout, "  Sandbox image: %s\n", pushed.Image)
			}
			return nil
		},
	}
	c.Flags().StringVar(&bundlePath, "bundle", "", "bundle directory or tar to publish (this or --results)")
	c.Flags().StringVar(&results, "results", "", "a run directory whose results to publish (samples.jsonl, pins.json, the reports, results.sigstore.json)")
	c.Flags().StringVar(&key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key the bundle must verify with before it is published")
	c.Flags().BoolVar(&insecure, "insecure", false, "allow plain HTTP to a registry that is not on loopback")
	return c
}
