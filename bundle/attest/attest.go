// Package attest makes and reads the in-toto Statements sealbench signs
// (bundle/sign puts them in Sigstore bundles): the SLSA provenance v1 of a
// sealed bundle, whose subjects are every file of the bundle, its tar and
// its Sandbox image's config; and the attestation of a run's results,
// whose subjects are samples.jsonl and pins.json.
//
// It builds the formats with in-toto's own Go types and checks subjects
// against digests the caller already has: it reads no file, so a check
// compares exactly the bytes the caller used.
//
// Host side only: the binaries a bundle ships link none of it (a test
// holds that).
package attest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sealbench/sealbench/manifests"
)

// Names of the attestation files, and what they attest.
const (
	// ResultsFile is a run's signed results, in its results directory.
	ResultsFile = "results.sigstore.json"
	// ResultsPredicateType is the predicate of a run's results attestation.
	ResultsPredicateType = "https://github.com/sealbench/sealbench/attestation/results/v1"
	// SLSAProvenanceV1 is the predicate type of a bundle's attestation
	// (cosign's --type slsaprovenance1).
	SLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// BuildType says how seal builds a bundle.
	BuildType = "https://github.com/sealbench/sealbench/buildtypes/seal/v1"
	// BuilderID names the builder: sealbench's seal, run by whoever holds
	// the key (no hosted builder vouches for it).
	BuilderID = "https://github.com/sealbench/sealbench/seal"
)

// Problem is one way signed subjects and the files differ.
type Problem struct {
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
}

func (p Problem) String() string { return p.Subject + ": " + p.Detail }

func subject(name string, d manifests.Digest) *intoto.ResourceDescriptor {
	return &intoto.ResourceDescriptor{Name: name, Digest: map[string]string{d.Algorithm: d.Hex}}
}

// Subjects returns st's subjects by name, each with its SHA-256. A subject
// without one, or named twice, is a problem.
func Subjects(st *intoto.Statement) (map[string]manifests.Digest, []Problem) {
	out := map[string]manifests.Digest{}
	var problems []Problem
	for _, s := range st.GetSubject() {
		d, err := manifests.ParseDigest(manifests.SHA256 + ":" + s.GetDigest()[manifests.SHA256])
		switch _, dup := out[s.GetName()]; {
		case err != nil:
			problems = append(problems, Problem{s.GetName(), "the subject has no valid sha256 digest"})
		case dup:
			problems = append(problems, Problem{s.GetName(), "named twice among the subjects"})
		default:
			out[s.GetName()] = d
		}
	}
	return out, problems
}

// Compare checks the signed subjects against want, the digests of what is
// there: every subject must be wanted with the same digest, and every
// wanted name a subject. Problems come sorted by subject.
func Compare(signed map[string]manifests.Digest, want map[string]manifests.Digest) []Problem {
	var problems []Problem
	for name, d := range signed {
		w, ok := want[name]
		switch {
		case !ok:
			problems = append(problems, Problem{name, "signed, but no such file here"})
		case w != d:
			problems = append(problems, Problem{name, fmt.Sprintf("is %s, the attestation signed %s", w.Short(12), d.Short(12))})
		}
	}
	for name := range want {
		if _, ok := signed[name]; !ok {
			problems = append(problems, Problem{name, "not among the attestation's subjects"})
		}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Subject < problems[j].Subject })
	return problems
}

// toStruct turns a JSON-encodable value into a protobuf Struct. Numbers
// become float64 there: callers pass large integers as strings.
func toStruct(v any) (*structpb.Struct, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// fromStruct decodes a protobuf Struct into v, refusing unknown fields.
func fromStruct(s *structpb.Struct, v any) error {
	b, err := protojson.Marshal(s)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func statement(predicateType string, subjects []*intoto.ResourceDescriptor, predicate *structpb.Struct) (*intoto.Statement, error) {
	st := &intoto.Statement{
		Type: intoto.StatementTypeUri, Subject: subjects,
		PredicateType: predicateType, Predicate: predicate,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("making an in-toto statement (a bug): %w", err)
	}
	return st, nil
}

// rfc3339 formats t as the attestations write times: UTC, to the nanosecond.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func uitoa(u uint64) string { return strconv.FormatUint(u, 10) }

func sortedKeys(m map[string]manifests.Digest) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
