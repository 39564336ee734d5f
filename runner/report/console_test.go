package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestConsoleGolden: what a run prints at its end, from the fixture run:
// the summary's lines and a line per target, in plain text. It names
// what the Markdown summary names, without a table or markup.
func TestConsoleGolden(t *testing.T) {
	r, _ := fixtureReport(t)
	var b bytes.Buffer
	if err := WriteConsole(&b, r); err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, "report.golden.console.txt", b.Bytes())
	out := b.String()
	for _, bad := range []string{"|", "**", "## "} {
		if strings.Contains(out, bad) {
			t.Errorf("Markdown (%q) in the console summary:\n%s", bad, out)
		}
	}
	for _, name := range r.TargetNames() {
		if !strings.Contains(out, "\n"+name) {
			t.Errorf("no line for target %s:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "docker (baseline)  LayerFS over native") || !strings.Contains(out, "command time vs docker") {
		t.Errorf("the baseline's line or a ratio to it is missing:\n%s", out)
	}
}
