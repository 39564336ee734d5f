package sockpath

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckMatchesTheKernel binds sockets at the limit and one byte past
// it: Check must refuse exactly what bind refuses, or less.
func TestCheckMatchesTheKernel(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{Max, Max + 1, 300} {
		pad := n - len(dir) - 1
		if pad < 1 {
			t.Skipf("temporary directory %q is too long for this test", dir)
		}
		p := filepath.Join(dir, strings.Repeat("s", pad))
		err := Check("socket", p)
		if n <= Max {
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			ln, lerr := net.Listen("unix", p)
			if lerr != nil {
				t.Fatalf("%d bytes: Check passed, bind refused: %v", n, lerr)
			}
			ln.Close()
			continue
		}
		if !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "shorter path") {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
}
