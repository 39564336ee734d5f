//go:build linux

package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
)

// blobFaults are the ways a blob goes bad under a Store: a byte flipped in
// place, and the file gone.
var blobFaults = map[string]func(t *testing.T, blob string){
	"flipped byte": func(t *testing.T, blob string) {
		f, err := os.OpenFile(blob, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, 3); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x20
		if _, err := f.WriteAt(b, 3); err != nil {
			t.Fatal(err)
		}
	},
	"deleted blob": func(t *testing.T, blob string) {
		if err := os.Remove(blob); err != nil {
			t.Fatal(err)
		}
	},
}

// TestDamagedBlobs: a blob damaged or deleted under a Store is found by
// check (exit 3, naming the blob, its Layers and its paths), not by the
// quick check, and a reader of the Workspace gets EIO for it (never the
// old bytes, never ENOENT for a file ls shows), which daemon.log explains
// once with the digest and the paths.
func TestDamagedBlobs(t *testing.T) {
	needFUSE(t)
	for name, fault := range blobFaults {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, "fast")
			src := filepath.Join(e.dir, "src")
			os.MkdirAll(filepath.Join(src, "sub"), 0o755)
			bad := []byte("the bytes of a file that will be damaged\n")
			os.WriteFile(filepath.Join(src, "a"), bad, 0o644)
			os.WriteFile(filepath.Join(src, "sub", "copy"), bad, 0o644)
			os.WriteFile(filepath.Join(src, "good"), []byte("fine\n"), 0o644)
			layer := strings.TrimSpace(run(t, daemonapi.ExitOK, "import", "--store", e.store, "--from", src, "-m", "base").stdout)
			sum := sha256.Sum256(bad)
			digest := hex.EncodeToString(sum[:])
			run(t, daemonapi.ExitOK, "check", "--store", e.store)
			fault(t, filepath.Join(e.store, "blobs", digest[:2], digest))

			run(t, daemonapi.ExitOK, "check", "--store", e.store, "--quick")
			r := run(t, daemonapi.ExitStore, "check", "--store", e.store)
			for _, want := range []string{digest, layer[:12], "/a", "/sub/copy"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("check does not name %q:\n%s", want, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "/good") {
				t.Errorf("check names a good file:\n%s", r.stdout)
			}

			e.mount(t)
			if _, err := os.Stat(filepath.Join(e.mnt, "a")); err != nil {
				t.Fatalf("stat of the damaged file: %v (the Layer still has it)", err)
			}
			for i := 0; i < 3; i++ {
				_, err := os.ReadFile(filepath.Join(e.mnt, "a"))
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("reading a file whose blob is damaged: %v, want EIO", err)
				}
			}
			if _, err := os.OpenFile(filepath.Join(e.mnt, "sub", "copy"), os.O_RDWR, 0); !errors.Is(err, syscall.EIO) {
				t.Errorf("opening it for writing (a copy-up): %v, want EIO", err)
			}
			if b, err := os.ReadFile(filepath.Join(e.mnt, "good")); err != nil || string(b) != "fine\n" {
				t.Errorf("a good file beside it: %q %v", b, err)
			}
			run(t, daemonapi.ExitOK, "unmount", "--control", e.ctl)
			var log string
			testenv.Eventually(t, "daemon.log naming the damaged blob", 20*time.Millisecond, func() bool {
				b, _ := os.ReadFile(filepath.Join(e.store, "daemon.log"))
				log = string(b)
				return strings.Contains(log, "answered the kernel")
			})
			if n := strings.Count(log, "answered the kernel EIO: reading base file data: blob "+digest); n != 1 {
				t.Errorf("daemon.log names the blob %d times, want once:\n%s", n, log)
			}
			for _, want := range []string{"/a", "/sub/copy", "EIO"} {
				if !strings.Contains(log, want) {
					t.Errorf("daemon.log does not say %q:\n%s", want, log)
				}
			}
		})
	}
}
