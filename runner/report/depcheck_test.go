package report_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestReportLinksOnlyWhatRenderingNeeds holds the renderer's role: it reads
// results and writes Markdown, HTML, JSON and CSV, so beside the standard
// library it links the result formats, the cell registry (for titles) and
// the statistics, and no Engine client, provisioning or signing.
func TestReportLinksOnlyWhatRenderingNeeds(t *testing.T) {
	testenv.OnlyDeps(t, "./runner/report",
		"github.com/sealbench/sealbench/runner/report",
		"github.com/sealbench/sealbench/runner/stats",
		"github.com/sealbench/sealbench/runner/cells",
		"github.com/sealbench/sealbench/manifests")
	// The whole figure, standard library included: 286 when the report
	// looked cell titles up through the runner and so linked Docker's
	// client. About 120 now, of which crypto/sha256 (manifests' digests)
	// brings 88: Go's FIPS 140 module. The bound catches a regression,
	// not a version of Go.
	out, err := cmdIn(t, "go", "list", "-deps", "./runner/report").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(out))); n > 140 {
		t.Errorf("runner/report links %d packages, the standard library's included; it linked about 120", n)
	}
}

func cmdIn(t *testing.T, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = testenv.ModuleRoot(t)
	return cmd
}
