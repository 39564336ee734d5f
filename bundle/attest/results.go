package attest

import (
	"bytes"
	"fmt"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/sealbench/sealbench/manifests"
)

// Results is the predicate of a run's results attestation: what the run
// was, besides the data its subjects pin.
type Results struct {
	RunID          string `json:"runId"`
	BundleID       string `json:"bundleId"`
	ManifestDigest string `json:"manifestDigest"`
	// Seed is decimal: the predicate's numbers are doubles.
	Seed           string   `json:"seed"`
	Cells          []string `json:"cells"`
	SamplesPerCell int      `json:"samplesPerCell"`
	Samples        int      `json:"samples"` // in samples.jsonl
	Failed         int      `json:"failed"`  // of them, not ok
	// Targets are the identity pins of each target, as pins.json has them.
	Targets []manifests.TargetPins `json:"targets"`
	Audit   Audit                  `json:"audit"`
	Signed  string                 `json:"signedOn"`
}

// Audit is the verdict of the run's audit, when it was signed.
type Audit struct {
	// Verdict is clean (nothing left), leftovers, kept (--keep: not torn
	// down, not audited) or failed (the audit could not run).
	Verdict   string `json:"verdict"`
	Leftovers int    `json:"leftovers,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// The audit verdicts.
const (
	AuditClean     = "clean"
	AuditLeftovers = "leftovers"
	AuditKept      = "kept"
	AuditFailed    = "failed"
)

// ResultsStatement attests a run's results: the exact bytes of its
// samples.jsonl and pins.json as the subjects, and a predicate made from
// those same bytes (the run, the bundle, each target's pins, the counts)
// and the audit's verdict.
func ResultsStatement(samples, pins []byte, bundleManifest manifests.Digest, audit Audit, signed time.Time) (*intoto.Statement, error) {
	p, err := manifests.ReadRunPins(bytes.NewReader(pins))
	if err != nil {
		return nil, fmt.Errorf("attesting results: %s: %w", manifests.PinsFile, err)
	}
	ss, err := manifests.ReadSamples(bytes.NewReader(samples))
	if err != nil {
		return nil, fmt.Errorf("attesting results: %s: %w", manifests.SamplesFile, err)
	}
	r := Results{
		RunID: p.RunID, BundleID: p.BundleID, ManifestDigest: bundleManifest.String(), Seed: uitoa(p.Seed),
		Cells: p.Cells, SamplesPerCell: p.Samples, Samples: len(ss), Targets: p.Targets,
		Audit: audit, Signed: rfc3339(signed),
	}
	for _, s := range ss {
		if s.RunID != p.RunID {
			return nil, fmt.Errorf("attesting results: a sample of run %s among run %s's", s.RunID, p.RunID)
		}
		if s.Failed() {
			r.Failed++
		}
	}
	pred, err := toStruct(r)
	if err != nil {
		return nil, err
	}
	return statement(ResultsPredicateType, []*intoto.ResourceDescriptor{
		subject(manifests.SamplesFile, manifests.DigestOf(samples)),
		subject(manifests.PinsFile, manifests.DigestOf(pins)),
	}, pred)
}

// CheckResults compares a verified results attestation with the digests
// of the bytes that were read (samples.jsonl and pins.json; a zero digest
// for a file that is not there) and with the run those bytes are of. It
// returns the predicate and every problem.
func CheckResults(st *intoto.Statement, samples, pins manifests.Digest, runID string) (*Results, []Problem) {
	if st.GetPredicateType() != ResultsPredicateType {
		return nil, []Problem{{"predicateType", fmt.Sprintf("is %q, not sealbench results", st.GetPredicateType())}}
	}
	var r Results
	if err := fromStruct(st.GetPredicate(), &r); err != nil {
		return nil, []Problem{{"predicate", fmt.Sprintf("unreadable: %v", err)}}
	}
	signed, problems := Subjects(st)
	want := map[string]manifests.Digest{manifests.SamplesFile: samples, manifests.PinsFile: pins}
	for name, d := range want {
		if d.IsZero() {
			delete(want, name)
		}
	}
	problems = append(problems, Compare(signed, want)...)
	if runID != "" && r.RunID != runID {
		problems = append(problems, Problem{"runId", fmt.Sprintf("the attestation is of run %s, these results are of run %s", r.RunID, runID)})
	}
	return &r, problems
}
