package orchestrate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/report"
)

// unsignedYet is what the report written before teardown says about the
// run's signature: unsigned for a run without a signing key; nothing yet
// for one with a key, whose report is written again once it is signed.
func unsignedYet(key *sign.Signer) func(*report.Input) {
	if key != nil {
		return nil
	}
	return func(in *report.Input) {
		in.Signature = &report.Signature{State: report.SignatureUnsigned, Detail: "run without --sign-key"}
	}
}

// signRun signs a run's results after its audit (whose verdict the
// attestation records), whatever runErr is, as long as there are samples
// to sign; then writes report.md again, saying what a check of the new
// attestation finds. It returns runErr, with a signing failure added.
func signRun(o RunOptions, outcome *RunOutcome, runErr error, logf func(string, ...any)) error {
	if o.SignKey == nil || outcome == nil {
		return runErr
	}
	logf = orNop(logf)
	dir := outcome.Dir
	if _, err := os.Stat(filepath.Join(dir, manifests.SamplesFile)); errors.Is(err, fs.ErrNotExist) {
		logf("no samples in %s: nothing to sign", dir)
		return runErr
	}
	fail := func(err error) error {
		return firstCoded(multierror.Append(runErr, fmt.Errorf("signing the results of run %s: %w", outcome.Run, err)).ErrorOrNil())
	}
	p, err := SignResults(dir, o.SignKey, o.Bundle.Verified.ManifestDigest, outcome.Audit)
	if err != nil {
		return fail(err)
	}
	outcome.Attestation = p
	v, err := o.SignKey.Verifier()
	if err != nil {
		return fail(err)
	}
	logf("signed the results with key %s: %s", v.KeyID(), p)
	if _, _, err := writeReport(dir, func(in *report.Input) { in.Signature, _ = CheckInput(in, v) }); err != nil {
		return fail(err)
	}
	return runErr
}

// CheckInput checks the results attestation of one report input (with v,
// or none: unchecked) against the digests of the bytes report.Load parsed
// (nothing is read again), and says what it found as the report shows it;
// the error is what --require-signed refuses anything but verified
// results with (CheckedResults.Err).
func CheckInput(in *report.Input, v *sign.Verifier) (*report.Signature, error) {
	c := CheckResults(in.Source, in.SamplesSHA256, in.PinsSHA256, inputRunID(in), v)
	return &report.Signature{State: c.State, Key: c.Key, Detail: c.Detail}, c.Err
}

func inputRunID(in *report.Input) string {
	if in.Pins != nil {
		return in.Pins.RunID
	}
	if len(in.Samples) > 0 {
		return in.Samples[0].RunID
	}
	return ""
}

// SignResults signs a run's results: results.sigstore.json in dir, whose
// subjects are the exact bytes of dir's samples.jsonl and pins.json (read
// once, hashed, and the predicate made from the same bytes).
func SignResults(dir string, signer *sign.Signer, manifestDigest manifests.Digest, audit attest.Audit) (string, error) {
	samples, err := os.ReadFile(filepath.Join(dir, manifests.SamplesFile))
	if err != nil {
		return "", fmt.Errorf("signing the results: %w", err)
	}
	pins, err := os.ReadFile(filepath.Join(dir, manifests.PinsFile))
	if err != nil {
		return "", fmt.Errorf("signing the results: %w", err)
	}
	st, err := attest.ResultsStatement(samples, pins, manifestDigest, audit, time.Now())
	if err != nil {
		return "", err
	}
	b, err := signer.SignStatement(st)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, attest.ResultsFile)
	if err := atomicfile.WriteFile(p, b, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	return p, nil
}

// CheckedResults is what CheckResults found of one run's results.
type CheckedResults struct {
	State  string // a report.Signature state
	Key    string // sha256:<hex of the key's DER>; the claimed one unless verified
	Detail string
	// Err is the refusal --require-signed makes of anything not verified:
	// exit 2 (ExitSignature) for unsigned results and signatures that do
	// not verify with the key, exit 1 (ExitMismatch) for signed results
	// that differ from what was signed. Nil when verified.
	Err error
}

// CheckResults checks the results attestation of the results at source (a
// run directory, or a samples.jsonl file with the attestation beside it)
// against the digests of the bytes that were read and reported (no file of
// the results is read again): the signature with v (nil: no key given, so
// unchecked), then each subject, then the run id.
func CheckResults(source string, samples, pins manifests.Digest, runID string, v *sign.Verifier) CheckedResults {
	dir := filepath.Dir(source)
	if fi, err := os.Stat(source); err == nil && fi.IsDir() {
		dir = source
	}
	p := filepath.Join(dir, attest.ResultsFile)
	b, err := sign.ReadAttestation(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return CheckedResults{State: report.SignatureUnsigned, Detail: "no " + attest.ResultsFile + ": the run was not signed (run --sign-key)",
			Err: coded(ExitSignature, "sign runs with `run --sign-key KEY`", "%s: the results are not signed (no %s)", source, attest.ResultsFile)}
	case err != nil:
		return CheckedResults{State: report.SignatureInvalid, Detail: err.Error(),
			Err: coded(ExitSignature, "", "%s: reading %s: %v", source, attest.ResultsFile, err)}
	}
	claimed := sign.HintDigest(b)
	if v == nil {
		return CheckedResults{State: report.SignatureUnchecked, Key: claimed, Detail: "signed, not checked: no --key given",
			Err: coded(ExitSignature, "pass the signer's public key with --key", "%s: the results are signed, but no --key was given to check them", source)}
	}
	st, err := v.VerifyAttestation(b)
	if err != nil {
		detail := fmt.Sprintf("the signature does not verify with key %s", v.KeyDigest())
		if claimed != "" && claimed != v.KeyDigest() {
			detail += " (it names key " + claimed + ")"
		}
		return CheckedResults{State: report.SignatureInvalid, Key: claimed, Detail: detail,
			Err: coded(ExitSignature, "pass the public key of the key that signed the run", "%s: %s: %v", source, attest.ResultsFile, err)}
	}
	_, problems := attest.CheckResults(st, samples, pins, runID)
	if len(problems) > 0 {
		var ps []string
		for _, pr := range problems {
			ps = append(ps, pr.String())
		}
		return CheckedResults{State: report.SignatureInvalid, Key: v.KeyDigest(), Detail: "altered since signed: " + strings.Join(ps, "; "),
			Err: coded(ExitMismatch, "the results differ from what the run signed: take them from the run's own directory",
				"%s: the results differ from what %s signed:\n  %s", source, attest.ResultsFile, strings.Join(ps, "\n  "))}
	}
	return CheckedResults{State: report.SignatureVerified, Key: v.KeyDigest(), Detail: "samples.jsonl and pins.json are as the run signed them"}
}

func coded(code int, hint, format string, args ...any) error {
	return &cliutil.UserError{Code: code, Err: fmt.Errorf(format, args...), Hint: hint}
}
