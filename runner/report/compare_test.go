package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
)

// changed is the fixed run again, as another bundle's run, with local's
// command times (and so its LayerFS over native) half as long again.
func changed() (*manifests.RunPins, []manifests.Sample) {
	pins, samples := fixedRun()
	pins.RunID, pins.BundleID = "run-20261201T100000Z", "build-linux-0123456789ab"
	pins.Targets[1].Kernel = "6.18.44"
	for i := range samples {
		s := &samples[i]
		s.RunID, s.BundleID = pins.RunID, pins.BundleID
		if s.Target == "local" {
			s.CommandNs = s.CommandNs * 3 / 2
		}
	}
	return pins, samples
}

func TestCompare(t *testing.T) {
	op, os := fixedRun()
	np, ns := changed()
	old, new := []Input{{Source: "old", Pins: op, Samples: os}}, []Input{{Source: "new", Pins: np, Samples: ns}}
	c, err := Compare(old, new, CompareOptions{Resamples: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pairs) != 3 || len(c.Cells) != 12 || c.Metrics[0].Metric != "commandNs" {
		t.Fatalf("pairs %v, cells %v, first metric %s", c.Pairs, c.Cells, c.Metrics[0].Metric)
	}
	for _, row := range c.Metrics[0].Rows {
		switch row.Pair.New {
		case "local":
			if row.ChangeCI == nil || row.ChangeCI.Contains(1) || !row.ChangeCI.Contains(1.5) || *row.NoChange {
				t.Errorf("local %s, 1.5 times slower: change %v %+v", row.Cell, *row.Change, row.ChangeCI)
			}
		case "docker":
			if *row.Change != 1 || !*row.NoChange || !strings.HasSuffix(row.ChangeText(), "~") {
				t.Errorf("docker %s, the same samples: %s", row.Cell, row.ChangeText())
			}
		}
	}
	if g := *c.Metrics[0].GeoMean[1].Value; g < 1.49 || g > 1.51 {
		t.Errorf("local's geometric mean change %v, want 1.5", g)
	}
	warnings := strings.Join(c.Warnings, "\n")
	for _, want := range []string{"Different bundles (old build-linux-bb5f636a0c1d, new build-linux-0123456789ab)", "local: kernel 6.1.0-40-amd64 → 6.18.44"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings lack %q:\n%s", want, warnings)
		}
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := WriteComparison(&b, c, format); err != nil {
			t.Fatal(err)
		}
		if format == "md" {
			testenv.Golden(t, "compare.golden.md", b.Bytes())
			for _, want := range []string{"| C01 | local | 15.6 [", "| +50.0% [", "| C01 | docker | 17.0 [", "+0.0% [+0.0%, +0.0%] ~ |", "no difference shown", "| geometric mean | local |  |  | +50.0% [+"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("the Markdown lacks %q", want)
				}
			}
		}
		if format == "html" && (strings.Count(b.String(), "<svg") != len(c.Metrics) || strings.Contains(b.String(), "<script")) {
			t.Errorf("the HTML comparison has %d charts for %d timings, or a script", strings.Count(b.String(), "<svg"), len(c.Metrics))
		}
		if format == "json" {
			var back Comparison
			if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Kind != CompareKind {
				t.Errorf("the JSON comparison does not read back: %v", err)
			}
		}
	}
}

// TestCompareRefuses: different targets or cells are refused unless
// named, and what is named must be in both runs.
func TestCompareRefuses(t *testing.T) {
	op, os := fixedRun()
	old := []Input{{Source: "old", Pins: op, Samples: os}}
	np, ns := changed()
	np.Targets = np.Targets[:2] // no lima
	np.Cells = np.Cells[:11]    // no C12
	var kept []manifests.Sample
	for _, s := range ns {
		if s.Target != "lima" && s.Cell != "C12" {
			kept = append(kept, s)
		}
	}
	new := []Input{{Source: "new", Pins: np, Samples: kept}}
	pairs := []TargetPair{{Old: "docker", New: "docker"}, {Old: "lima", New: "local"}}
	for _, tt := range []struct {
		name string
		opt  CompareOptions
		want string
	}{
		{"targets differ", CompareOptions{}, "the runs' targets differ (old: docker, local, lima; new: docker, local): name the pairs to compare, e.g. --match docker=docker"},
		{"cells differ", CompareOptions{Pairs: pairs}, "the runs' cells differ (only in the old run: C12; only in the new: —): name the cells to compare, e.g. --cells C01,"},
		{"a pair names no target", CompareOptions{Pairs: []TargetPair{{Old: "apple", New: "local"}}}, `the old run has no target "apple"`},
		{"a cell not in both", CompareOptions{Pairs: pairs, Cells: []string{"C12"}}, "cell C12 is not in both runs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Resamples = 200
			_, err := Compare(old, new, tt.opt)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compare = %v, want an InputError containing %q", err, tt.want)
			}
		})
	}
	c, err := Compare(old, new, CompareOptions{Pairs: pairs, Cells: []string{"C01", "C02"}, Resamples: 200})
	if err != nil || len(c.Metrics[0].Rows) != 4 || c.Metrics[0].Rows[2].Pair.String() != "lima → local" {
		t.Errorf("named pairs and cells: %v, %+v", err, c)
	}
	for _, s := range []string{"local=lima", "local"} {
		if _, err := ParseTargetPair(s); err != nil {
			t.Errorf("ParseTargetPair(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"=lima", "a=b=c", "local="} {
		if _, err := ParseTargetPair(s); err == nil {
			t.Errorf("ParseTargetPair(%q) took it", s)
		}
	}
}

// TestCompareWarnsOfAnEngineTransport: a target reached over a socket
// leaves its transport empty; one that moved to msb exec is warned of.
func TestCompareWarnsOfAnEngineTransport(t *testing.T) {
	op, os := fixedRun()
	np, ns := changed()
	for i := range np.Targets {
		if np.Targets[i].Name == "docker" {
			np.Targets[i].Transport = "msb-exec"
		}
	}
	c, err := Compare([]Input{{Source: "old", Pins: op, Samples: os}}, []Input{{Source: "new", Pins: np, Samples: ns}}, CompareOptions{Resamples: 50})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(c.Warnings, "\n"); !strings.Contains(w, "docker: Engine transport socket → msb-exec") {
		t.Errorf("no warning of docker's Engine transport:\n%s", w)
	}
}
