package sign

import (
	"bytes"
	"errors"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

func testStatement(t testing.TB) *intoto.Statement {
	t.Helper()
	pred, err := structpb.NewStruct(map[string]any{"runId": "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	return &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: "samples.jsonl", Digest: map[string]string{"sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}},
		PredicateType: "https://example.com/test/v1",
		Predicate:     pred,
	}
}

// TestSignStatement: a Sigstore bundle verifies with its key and returns
// the statement; the same statement signs to the same bytes; another key,
// a changed payload and a changed signature are refused; the bundle names
// its key by the hint HintDigest reads.
func TestSignStatement(t *testing.T) {
	_, s, v := newPair(t, testPassword)
	b, err := s.SignStatement(testStatement(t))
	if err != nil {
		t.Fatal(err)
	}
	st, err := v.VerifyAttestation(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetSubject()[0].GetName() != "samples.jsonl" || st.GetPredicate().GetFields()["runId"].GetStringValue() != "run-1" {
		t.Errorf("the statement read back: %v", st)
	}
	again, _ := s.SignStatement(testStatement(t))
	if !bytes.Equal(b, again) {
		t.Error("signing the same statement twice gave two bundles")
	}
	if HintDigest(b) != v.KeyDigest() {
		t.Errorf("the bundle names key %q, the key is %s", HintDigest(b), v.KeyDigest())
	}

	_, _, other := newPair(t, testPassword)
	if _, err := other.VerifyAttestation(b); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key: %v", err)
	}
	for name, bad := range map[string][]byte{
		"a changed payload":    bytes.Replace(b, []byte(`"payload": "`), []byte(`"payload": "e`), 1),
		"a changed signature":  bytes.Replace(b, []byte(`"sig": "`), []byte(`"sig": "AA`), 1),
		"not a bundle":         []byte("{}"),
		"another payload type": bytes.Replace(b, []byte(InTotoPayloadType), []byte("application/json"), 1),
	} {
		if bytes.Equal(bad, b) {
			t.Fatalf("%s: the change did not apply", name)
		}
		if _, err := v.VerifyAttestation(bad); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzVerifyAttestation: whatever the bytes, VerifyAttestation answers
// without panicking, and what it accepts is a valid statement whose
// bundle is the one signed (the seed) or one that means the same.
func FuzzVerifyAttestation(f *testing.F) {
	dir := f.TempDir()
	priv, pub, err := WriteKeyPair(dir, nil, false)
	if err != nil {
		f.Fatal(err)
	}
	s, err := LoadPrivateKey(priv, nil)
	if err != nil {
		f.Fatal(err)
	}
	v, err := LoadPublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	good, err := s.SignStatement(testStatement(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := v.VerifyAttestation(b)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("an error that is not ErrBadSignature: %v", err)
			}
			return
		}
		if st.Validate() != nil || st.GetSubject()[0].GetName() != "samples.jsonl" {
			t.Fatalf("accepted %v", st)
		}
	})
}
