package benchstat

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
)

// readFixture reads the report package's fixed run: three targets, twelve
// cells, three rounds, a failed and an ineligible sample.
func readFixture(t *testing.T) []manifests.Sample {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "run", manifests.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := manifests.ReadSamples(f)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

// Every ok sample gives a line per side it timed, named for its cell
// (code and title), target and side, in seconds; what benchfmt reads back
// is what was written.
func TestWrite(t *testing.T) {
	samples := readFixture(t)
	var b bytes.Buffer
	if err := Write(&b, samples); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, s := range samples {
		if s.Status == manifests.StatusOK {
			want += 3 // LayerFS, native, the A/A repeat
		}
	}
	r := benchfmt.NewReader(&b, "fixture")
	n := 0
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		n++
		name := res.Name.String()
		if !strings.HasPrefix(name, "C") || !strings.Contains(name, "/target=") || !strings.Contains(name, "/side=") {
			t.Errorf("a result named %q", name)
		}
		if v, ok := res.Value("sec/op"); !ok || v <= 0 || v > 100 {
			t.Errorf("%s: %v sec/op", name, v)
		}
		if res.GetConfig("sealbench-run") != samples[0].RunID {
			t.Errorf("%s: run %q", name, res.GetConfig("sealbench-run"))
		}
	}
	if err := r.Err(); err != nil || n != want {
		t.Errorf("read back %d results (%v), want %d", n, err, want)
	}
	if got, _ := Name("C01"); got != "C01_create_1_000_files" {
		t.Errorf("C01's name: %q", got)
	}
	if _, err := Name("C13"); err == nil {
		t.Error("a name for a cell that does not exist")
	}
}

// Two runs written this way go through benchstat itself, which names
// every cell and compares the two.
func TestBenchstatReadsTwoRuns(t *testing.T) {
	testenv.Short(t, "builds benchstat")
	testenv.NeedCommand(t, "go")
	samples := readFixture(t)
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "old.txt"), filepath.Join(dir, "new.txt")}
	for i, f := range files {
		var b bytes.Buffer
		if i == 1 {
			for j := range samples { // the new run: LayerFS a tenth slower
				samples[j].CommandNs += samples[j].CommandNs / 10
			}
		}
		if err := Write(&b, samples); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "run", "golang.org/x/perf/cmd/benchstat", files[0], files[1])
	cmd.Dir = testenv.ModuleRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchstat: %v\n%s", err, out)
	}
	for _, c := range cells.Names() {
		name, _ := Name(c)
		if !strings.Contains(string(out), name) {
			t.Errorf("benchstat's table lacks %s:\n%s", name, out)
		}
	}
	// LayerFS a tenth slower in every cell, the native sides unchanged:
	// the geometric mean of the changes moves up.
	if !strings.Contains(string(out), "geomean") || !strings.Contains(string(out), "+3.") {
		t.Errorf("benchstat shows no geomean change of about +3%%:\n%s", out)
	}
}
