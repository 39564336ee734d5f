package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadSamples: the results reader never panics, and whatever it accepts
// is valid and survives a write and a second read unchanged.
func FuzzReadSamples(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "samples.golden.jsonl")); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2]) // truncated mid-line
	}
	f.Add([]byte(`{"formatVersion":2}` + "\n"))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, err := ReadSamples(bytes.NewReader(b))
		if err != nil {
			return
		}
		var again bytes.Buffer
		for i := range samples {
			if err := samples[i].Validate(); err != nil {
				t.Fatalf("ReadSamples accepted an invalid sample: %v", err)
			}
			line, err := samples[i].MarshalLine()
			if err != nil {
				t.Fatalf("MarshalLine: %v", err)
			}
			again.Write(line)
		}
		back, err := ReadSamples(&again)
		if err != nil || len(back) != len(samples) {
			t.Fatalf("what was read does not read back: %d samples, %v", len(back), err)
		}
	})
}
