package provision

import (
	"os"
	"testing"
)

// TestRunKnown: a run is known while its directory is there and after it
// is gone (the history names it); an id never made is not, nor a bad one.
func TestRunKnown(t *testing.T) {
	state := t.TempDir()
	r, err := NewRun(state)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !RunKnown(state, r.ID) {
		t.Errorf("run %s, just made, is unknown", r.ID)
	}
	if err := os.RemoveAll(r.Dir); err != nil {
		t.Fatal(err)
	}
	if !RunKnown(state, r.ID) {
		t.Errorf("run %s, torn down, is unknown", r.ID)
	}
	for _, id := range []string{"20200101T000000-abcdef", "../../etc", ""} {
		if RunKnown(state, id) {
			t.Errorf("run %q, never made, is known", id)
		}
	}
}
