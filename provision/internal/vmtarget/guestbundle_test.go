package vmtarget

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
)

// TestInstallBundleScript runs the guest's install-and-check script here
// (it makes the files root's, so as root): a bundle as its manifest says
// is installed with the manifest's modes; one with a file more, a changed
// file or a SHA256SUMS that is not the manifest's is refused.
func TestInstallBundleScript(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "sha256sum")
	files := map[string]string{"README": "hello\n", "bin/tool": "#!/bin/sh\n"}
	m := &manifests.BundleManifest{SchemaVersion: 1}
	for _, p := range []string{"README", "bin/tool"} {
		mode := manifests.FileMode(0o644)
		if p == "bin/tool" {
			mode = 0o755
		}
		m.Files = append(m.Files, manifests.BundleFile{Path: p, Size: int64(len(files[p])), Mode: mode, Digest: manifests.DigestOf([]byte(files[p]))})
	}
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		change  func(src string)
		wantErr string
	}{
		{"as verified", func(string) {}, ""},
		{"a file more", func(src string) { os.WriteFile(filepath.Join(src, "extra"), nil, 0o644) }, "other files than its manifest lists"},
		{"a changed file", func(src string) { os.WriteFile(filepath.Join(src, "README"), []byte("HELLO\n"), 0o644) }, "FAILED"},
		{"another SHA256SUMS", func(src string) {
			os.WriteFile(filepath.Join(src, manifests.SumsFile), append(m.SHA256SUMS(), '\n'), 0o644)
		}, "not the verified manifest's"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join(tmp, "src")
			all := map[string]string{manifests.ManifestFile: string(mb), manifests.SignatureFile: "sig", manifests.SumsFile: string(m.SHA256SUMS())}
			for p, b := range files {
				all[p] = b
			}
			for p, b := range all {
				os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755)
				if err := os.WriteFile(filepath.Join(src, p), []byte(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c.change(src)
			dir := filepath.Join(tmp, "opt", "build-linux-0123456789ab")
			out, err := exec.Command("/bin/sh", "-c", InstallBundleScript(m, dir, `cp -R `+ShellQuote(src)+` "$dir.new"`)).CombinedOutput()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("%v:\n%s", err, out)
				}
				if fi, err := os.Stat(filepath.Join(dir, "bin/tool")); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("bin/tool: %v %v, want mode 0755", fi, err)
				}
				if !strings.Contains(string(out), "bundle checked: 2 files") {
					t.Errorf("output:\n%s", out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), c.wantErr) {
				t.Errorf("%v, output:\n%s\nwant a failure saying %q", err, out, c.wantErr)
			}
		})
	}
}
