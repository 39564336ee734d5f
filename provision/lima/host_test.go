package lima

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// TestQEMUWrapperForcesTCG runs the wrapper in front of a stand-in for
// QEMU that prints its arguments, one per line.
func TestQEMUWrapperForcesTCG(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake qemu")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a do printf '%s\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "qemu-tcg")
	if err := os.WriteFile(wrapper, qemuWrapper(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want []string }{
		{
			[]string{"-m", "2048", "-cpu", "host", "-machine", "q35,accel=kvm", "-smp", "2"},
			[]string{"-m", "2048", "-cpu", "qemu64", "-machine", "q35,accel=tcg", "-smp", "2"},
		},
		{
			[]string{"-cpu", "host,-pdpe1gb", "-accel", "kvm", "-enable-kvm", "-name", "a b  c"},
			[]string{"-cpu", "qemu64,-pdpe1gb", "-accel", "tcg", "-name", "a b  c"},
		},
		{
			[]string{"-accel", "kvm,kernel-irqchip=on", "-drive", "file=/x/y's disk,if=virtio", "-cpu", "max"},
			[]string{"-accel", "tcg", "-drive", "file=/x/y's disk,if=virtio", "-cpu", "max"},
		},
		{
			// Only -cpu's value is a CPU model: "host" elsewhere stays.
			[]string{"-M", "none", "-accel", "help", "-name", "host"},
			[]string{"-M", "none", "-accel", "help", "-name", "host"},
		},
	} {
		out, err := exec.Command(wrapper, tc.in...).Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.in, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if !slices.Equal(got, tc.want) {
			t.Errorf("wrapper %q\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestCopyVerified(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := []byte("the verified bytes")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	if err := copyVerified(src, dst, int64(len(data)), manifests.DigestOf(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != string(data) {
		t.Errorf("copied %q", b)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	os.Remove(dst)
	for _, bad := range []struct {
		size int64
		d    manifests.Digest
	}{{int64(len(data)), manifests.DigestOf([]byte("other"))}, {int64(len(data)) - 1, manifests.DigestOf(data)}, {int64(len(data)) + 1, manifests.DigestOf(data)}} {
		if err := copyVerified(src, dst, bad.size, bad.d, 0o644); err == nil {
			t.Errorf("size %d digest %s: copied", bad.size, bad.d.Short(8))
		}
		if exists(dst) || exists(dst+".tmp") {
			t.Errorf("size %d digest %s: a failed copy left a file", bad.size, bad.d.Short(8))
		}
	}
}

func TestCheckKeyRefusesWhatIsNotOurs(t *testing.T) {
	id := "20261129T093949-97ebfd"
	good := filepath.Join("/var/lib", dirBase, id)
	for _, key := range []string{good, good + "/lima/" + Instance} {
		if _, _, err := checkKey(manifests.LedgerEntry{RunID: id, Kind: manifests.ResourceVM, Key: key}); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	for _, key := range []string{"/", "/var/lib", "/home/user/" + id, good + "/../x", "relative/" + id,
		good + "/lima/other", filepath.Join("/var/lib", dirBase, "not a run id")} {
		if _, _, err := checkKey(manifests.LedgerEntry{RunID: id, Kind: manifests.ResourceVM, Key: key}); err == nil {
			t.Errorf("%s: accepted", key)
		}
	}
	if _, _, err := checkKey(manifests.LedgerEntry{RunID: "20261129T093949-000000", Kind: manifests.ResourceVM, Key: good}); err == nil {
		t.Error("another run's directory is accepted")
	}
}

// TestFixRemovesAnOrphanedLimaDir: a run's Lima directory with a process
// still holding it, and no ledger anywhere (the run directory is gone), is
// what the audit finds and --fix removes, process first.
func TestFixRemovesAnOrphanedLimaDir(t *testing.T) {
	id := runs.NewRunID()
	root := filepath.Join(Dir(), id)
	if err := secureDir(root, 0o711); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	marker := filepath.Join(root, "lima", Instance, "serial.log")
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tail := exec.Command("tail", "-f", marker) // stands in for a hostagent left running
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { tail.Wait(); close(exited) }()
	defer tail.Process.Kill()
	// Until /proc shows tail's own argv, no scan can tell it holds the
	// directory.
	testenv.Eventually(t, "tail -f "+marker+" in /proc", 20*time.Millisecond, func() bool { return len(procsUnder(root)) > 0 })

	ctx := context.Background()
	state := t.TempDir()
	res, err := runs.Audit(ctx, runs.AuditOptions{StateDir: state, Run: id, Targets: []string{Name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leftovers) != 1 || res.Leftovers[0].Key != root || res.Leftovers[0].Kind != manifests.ResourceVM ||
		!strings.Contains(res.Leftovers[0].Detail, "processes") {
		t.Fatalf("audit: %v, want the directory %s with its process", res.Leftovers, root)
	}
	after, err := runs.Fix(ctx, runs.AuditOptions{StateDir: state, Run: id, Targets: []string{Name}}, t.Logf)
	if err != nil {
		t.Fatalf("fix: %v", err)
	}
	if len(after.Leftovers) > 0 {
		t.Errorf("after --fix: %v", after.Leftovers)
	}
	select {
	case <-exited:
	case <-time.After(testenv.Patience):
		t.Error("the process holding the directory still runs")
	}
	if exists(root) {
		t.Errorf("%s is still there", root)
	}
}
