package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// recorder keeps what Install records.
type recorder struct{ entries []manifests.LedgerEntry }

func (r *recorder) Record(e manifests.LedgerEntry) error {
	r.entries = append(r.entries, e)
	return nil
}

// smallBundle is a verified bundle's directory and manifest with three
// files, of which a target needs two.
func smallBundle(t *testing.T) (string, *manifests.BundleManifest) {
	t.Helper()
	dir := t.TempDir()
	m := &manifests.BundleManifest{SchemaVersion: manifests.BundleSchemaVersion}
	for p, body := range map[string]string{"bin/linux-amd64/standin": "#!/bin/sh\necho standin\n", "cells/C01.sh": "echo one\n", "README": "not needed\n"} {
		mode := manifests.FileMode(0o644)
		if strings.HasPrefix(p, "bin/") {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, manifests.BundleFile{Path: p, Size: int64(len(body)), Mode: mode, Digest: manifests.DigestOf([]byte(body))})
	}
	m.SortFiles()
	return dir, m
}

// TestInstallBundleOnAHost installs two files of a bundle on a fake host
// and checks them there; a copy tampered with on the host (a changed
// file, a file more, a SHA256SUMS line more) is refused, naming the file,
// and so is a bundle here that changed after it was verified.
func TestInstallBundleOnAHost(t *testing.T) {
	sshtest.Need(t)
	if runtime.GOOS != "linux" {
		t.Skip("the fake host is this machine")
	}
	h := sshtest.Start(t, "127.0.0.2")
	ctx := context.Background()
	c, err := sshx.Dial(ctx, h.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := remote.Platform(ctx, c)
	if err != nil || p.String() != "linux/"+runtime.GOARCH {
		t.Fatalf("Platform: %v %v, want linux/%s", p, err, runtime.GOARCH)
	}
	src, m := smallBundle(t)
	// The fake host is this machine: its directory is one here.
	dir := filepath.Join(t.TempDir(), "runs", "r1", "local-h", "bundle")
	b := &remote.HostBundle{SSH: c, Host: "ssh://root@127.0.0.2:22", Target: "local-h", Bundle: src, Manifest: m,
		Files: []string{"bin/linux-amd64/standin", "cells/C01.sh"}, Dir: dir}
	var rec recorder
	if err := b.Install(ctx, &rec); err != nil {
		t.Fatalf("Install: %v", err)
	}
	if len(rec.entries) != 1 || rec.entries[0].Key != dir || rec.entries[0].Host != b.Host || rec.entries[0].Kind != manifests.ResourceDir {
		t.Errorf("recorded %+v, want the directory on the host", rec.entries)
	}
	sums, err := os.ReadFile(filepath.Join(dir, manifests.SumsFile))
	if err != nil || string(sums) != string(m.SHA256SUMSOf(func(p string) bool { return p != "README" })) {
		t.Errorf("SHA256SUMS on the host: %q %v", sums, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin/linux-amd64/standin")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the stand-in on the host: %v %v, want mode 0755", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); !os.IsNotExist(err) {
		t.Errorf("README, which the target does not need, is on the host: %v", err)
	}

	for _, c := range []struct {
		name, want string
		tamper     func()
	}{
		{"a changed file", "cells/C01.sh: FAILED", func() { os.WriteFile(filepath.Join(dir, "cells/C01.sh"), []byte("echo two\n"), 0o644) }},
		{"a file more", "+./cells/C02.sh", func() { os.WriteFile(filepath.Join(dir, "cells/C02.sh"), nil, 0o644) }},
		{"a link more", "+./bin/sh", func() { os.Symlink("/bin/sh", filepath.Join(dir, "bin/sh")) }},
		{"a SHA256SUMS line more", "SHA256SUMS in " + dir, func() {
			f, _ := os.OpenFile(filepath.Join(dir, manifests.SumsFile), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(m.Files[0].Digest.Hex + "  README\n")
			f.Close()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := b.Install(ctx, &rec); err != nil {
				t.Fatalf("Install: %v", err)
			}
			c.tamper()
			err := b.Check(ctx)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "not the verified ones") {
				t.Errorf("Check after %s: %v, want a refusal naming %q", c.name, err, c.want)
			}
		})
	}

	// The bundle here changed after it was verified: the copy is refused.
	if err := os.WriteFile(filepath.Join(src, "cells/C01.sh"), []byte("echo tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Install(ctx, &rec); err == nil || !strings.Contains(err.Error(), "cells/C01.sh") {
		t.Errorf("Install of a changed bundle: %v, want a refusal naming cells/C01.sh", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cells/C01.sh")); !os.IsNotExist(err) {
		t.Errorf("the changed file is on the host: %v", err)
	}
}
