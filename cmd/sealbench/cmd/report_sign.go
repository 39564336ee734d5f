//go:build !sealbench_bundle

package cmd

import (
	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/runner/report"
)

// reportSigning is how `sealbench report` checks the results attestation
// (results.sigstore.json) of each run it reads. The check is the host's
// (orchestrate.CheckResults): runner/report, the renderer, links no signing code
// and only shows what it is told in Input.Signature.
type reportSigning struct {
	key           string
	requireSigned bool
}

func (s *reportSigning) flags(fl *pflag.FlagSet) {
	fl.StringVar(&s.key, "key", "", "public key to check each run's signed results (results.sigstore.json) with")
	fl.BoolVar(&s.requireSigned, "require-signed", false, "refuse results that are unsigned, signed by another key, or altered since signed (needs --key)")
}

// check refuses a bad flag combination or key, before anything is read.
func (s *reportSigning) check() (*sign.Verifier, error) {
	if s.requireSigned && s.key == "" {
		return nil, usageErrorf("pass the signer's public key: --require-signed --key sealbench.pub", "--require-signed needs --key")
	}
	if s.key == "" {
		return nil, nil
	}
	return loadVerifier(s.key)
}

// apply checks every input's results attestation against the digests of
// the bytes report.Load parsed (nothing is read again), puts what it found
// into Input.Signature, and, with --require-signed, refuses the first that
// is not verified: exit 2 unsigned or not signed by --key, exit 1 altered.
func (s *reportSigning) apply(inputs []report.Input, v *sign.Verifier) error {
	for i := range inputs {
		var err error
		inputs[i].Signature, err = orchestrate.CheckInput(&inputs[i], v)
		if s.requireSigned && err != nil {
			return err
		}
	}
	return nil
}
