package orchestrate_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestOnlyTheCommandsImportHost holds the top of the layers: host does the
// host's jobs for the command line, so only cmd/sealbench imports it, and
// nothing it calls climbs back up to it.
func TestOnlyTheCommandsImportHost(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = testenv.ModuleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const host = "github.com/sealbench/sealbench/orchestrate"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == host || strings.HasPrefix(f[0], "github.com/sealbench/sealbench/cmd/sealbench") {
			continue
		}
		for _, imp := range f[1:] {
			if imp == host {
				t.Errorf("%s imports host: only cmd/sealbench may", f[0])
			}
		}
	}
}
