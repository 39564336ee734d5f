//go:build !sealbench_bundle

package cmd

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle/sign"
)

func newKeygenCmd(g *global) *cobra.Command {
	var out string
	var force bool
	c := &cobra.Command{
		Use:   "keygen",
		Short: "Create a signing key pair (sealbench.key, sealbench.pub)",
		Long: `Create an ECDSA P-256 key pair for signing bundles: sealbench.key, encrypted
with the password in $SEALBENCH_PASSWORD (empty is allowed, as cosign allows an
empty COSIGN_PASSWORD), and sealbench.pub. The files are in the format sigstore's
cryptoutils reads and writes, so cosign can use the same keys. Existing keys are
never overwritten unless --force is given, and --force replaces only regular
files: a symlink, fifo or device where a key would go is refused (exit 3)
before either key is written. An --out that is not a directory is refused.`,
		Example: `  SEALBENCH_PASSWORD='correct horse' sealbench keygen
  SEALBENCH_PASSWORD= sealbench keygen --out ./keys --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkOutDir("--out", out, "pass the directory to write sealbench.key and sealbench.pub into"); err != nil {
				return err
			}
			pw, err := readPassword(g, true)
			if err != nil {
				return err
			}
			g.outputs.Makes(out)
			priv, pub, err := sign.WriteKeyPair(out, pw, force)
			g.outputs.Made(priv, pub)
			if errors.Is(err, fs.ErrExist) {
				return usageErrorf("pass --force to replace it, or --out to write elsewhere", "%v", err)
			}
			if err != nil {
				return err
			}
			v, err := sign.LoadPublicKey(pub)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]string{"privateKey": priv, "publicKey": pub, "keyId": v.KeyID()})
			}
			fmt.Fprintf(g.stdout, "wrote private key %s (encrypted, mode 0600)\nwrote public key  %s (key id %s)\n", priv, pub, v.KeyID())
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", defaultKeyDir(), "directory to write the key pair into")
	c.Flags().BoolVar(&force, "force", false, "replace an existing key pair")
	return c
}
