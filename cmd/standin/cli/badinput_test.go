//go:build linux

package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestBadInput runs each command with each class of bad input: the exit
// code is the documented one, stderr names the problem and the next step,
// and nothing under the test's directory was created or changed. (standin
// has no numeric flags and no flags that conflict: those classes have no
// case here.)
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		class string
		// args gets the test's directory; setup may prepare it.
		args  func(dir string) []string
		setup func(t *testing.T, dir string)
		code  int
		// stderr must hold each of these: the problem, and the next step.
		stderr []string
	}{
		{"serve without --state", "missing", func(d string) []string { return []string{"serve", "--socket", d + "/run/s.sock"} },
			nil, ExitUnusable, []string{`"state" not set`, "--help"}},
		{"serve with a socket directory whose parent is missing", "missing",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/no/such/s.sock", "--state", d + "/state"}
			}, nil, ExitUnusable, []string{"is missing and so is its parent", "hint: give --socket"}},
		{"serve with a state path that is a file", "wrong type",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/run/s.sock", "--state", d + "/file"}
			},
			func(t *testing.T, d string) { os.WriteFile(filepath.Join(d, "file"), []byte("x"), 0o600) },
			ExitUnusable, []string{"is a file", "give --state a directory"}},
		{"serve with a state path under a file", "wrong type",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/run/s.sock", "--state", d + "/file/state"}
			},
			func(t *testing.T, d string) { os.WriteFile(filepath.Join(d, "file"), []byte("x"), 0o600) },
			ExitUnusable, []string{"which is a file", "give --state a directory"}},
		{"serve with a socket directory that is a file", "wrong type",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/file/s.sock", "--state", d + "/state"}
			},
			func(t *testing.T, d string) { os.WriteFile(filepath.Join(d, "file"), []byte("x"), 0o600) },
			ExitUnusable, []string{"is not a directory", "hint: give --socket"}},
		{"serve with a socket path that is a file", "wrong type",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/run/s.sock", "--state", d + "/state"}
			},
			func(t *testing.T, d string) {
				os.Mkdir(filepath.Join(d, "run"), 0o700)
				os.WriteFile(filepath.Join(d, "run", "s.sock"), []byte("x"), 0o600)
			}, ExitUnusable, []string{"is not a socket", "give --socket another path"}},
		{"serve with an empty --state", "empty",
			func(d string) []string { return []string{"serve", "--socket", d + "/run/s.sock", "--state", ""} },
			nil, ExitUnusable, []string{"no state directory given"}},
		{"serve with a socket path over sun_path", "too long",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/run/" + strings.Repeat("s", 120) + ".sock", "--state", d + "/state"}
			}, nil, ExitUnusable, []string{"at most 107", "use a shorter path"}},
		{"serve with a socket in a directory others can enter", "hostile path",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/open/s.sock", "--state", d + "/state"}
			},
			func(t *testing.T, d string) {
				os.Mkdir(filepath.Join(d, "open"), 0o755)
				os.Chmod(filepath.Join(d, "open"), 0o755)
			},
			ExitUnusable, []string{"unsafe socket directory", "mode 0755", "hint: give --socket"}},
		{"serve with a state path overlayfs cannot carry", "hostile path",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/run/s.sock", "--state", d + "/a,lowerdir=/"}
			},
			nil, ExitUnusable, []string{"overlayfs mount options cannot carry", "give --state another path"}},
		{"inventory of a missing state directory", "missing",
			func(d string) []string { return []string{"inventory", "--state", d + "/nothing"} },
			nil, ExitUnusable, []string{"no such file", "hint: give --state"}},
		{"inventory of a file", "wrong type",
			func(d string) []string { return []string{"inventory", "--state", d + "/file"} },
			func(t *testing.T, d string) { os.WriteFile(filepath.Join(d, "file"), []byte("x"), 0o600) },
			ExitUnusable, []string{"not a directory", "hint: give --state"}},
		{"an argument serve does not take", "wrong type",
			func(d string) []string {
				return []string{"serve", "--socket", d + "/run/s.sock", "--state", d + "/state", "extra"}
			},
			nil, ExitUnusable, []string{"unknown command", "--help"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			before := testenv.Snapshot(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			var out, errb strings.Builder
			code := Main(ctx, tc.args(dir), &out, &errb)
			if ctx.Err() != nil {
				t.Fatalf("standin %q ran until the test's deadline: it was not refused", tc.args(dir))
			}
			if code != tc.code {
				t.Errorf("[%s] exit %d, want %d; stderr %q", tc.class, code, tc.code, errb.String())
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("[%s] stderr %q does not say %q", tc.class, errb.String(), s)
				}
			}
			if d := testenv.SnapshotDiff(before, testenv.Snapshot(t, dir)); len(d) > 0 {
				t.Errorf("[%s] a refused command changed its directory: %v", tc.class, d)
			}
		})
	}
}
