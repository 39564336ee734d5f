//go:build linux

package layerfs

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/layerfs/uring"
)

func runTool(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestFio writes with fio's verify= on a workspace, checks the data as it
// goes, then commits, remounts the new Layer and verifies it again.
func TestFio(t *testing.T) {
	needFUSE(t)
	fio := testenv.NeedCommand(t, "fio")
	size := "64M"
	if testing.Short() {
		size = "8M"
	}
	forTransports(t, func(t *testing.T, tr uring.Transport) { testFio(t, fio, size, tr) })
}

func testFio(t *testing.T, fio, size string, tr uring.Transport) {
	s := newStore(t, ProfileFast)
	ws := mountWSOpts(t, s, MountOptions{Transport: tr})
	job := []string{"--name=verify", "--directory=" + ws.Mountpoint(), "--size=" + size, "--numjobs=2",
		"--verify=crc32c", "--verify_fatal=1", "--ioengine=psync", "--group_reporting"}
	runTool(t, ws.Mountpoint(), fio, append(job, "--rw=randwrite", "--bs=4k", "--fsync=256", "--do_verify=1")...)
	runTool(t, ws.Mountpoint(), fio, append(job, "--rw=write", "--bs=1M", "--ioengine=mmap", "--do_verify=1", "--overwrite=1")...)
	res, err := ws.Commit(context.Background(), "fio")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Unmount(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	ws2 := mountWSOpts(t, s, MountOptions{Layer: res.Layer, Transport: tr})
	job[1] = "--directory=" + ws2.Mountpoint()
	runTool(t, ws2.Mountpoint(), fio, append(job, "--rw=write", "--bs=1M", "--verify_only=1")...)
}

// TestStressNG runs a filesystem subset of stress-ng with verification on a
// workspace.
func TestStressNG(t *testing.T) {
	needFUSE(t)
	sng := testenv.NeedCommand(t, "stress-ng")
	// link and symlink bogo-ops make thousands of links each (with a
	// statfs per link, every one a FUSE round trip), so they get fewer.
	ops, linkOps := "200", "2"
	if testing.Short() {
		ops, linkOps = "40", "1"
	}
	s := newStore(t, ProfileFast)
	ws := mountWS(t, s, nil)
	runTool(t, ws.Mountpoint(), sng, "--temp-path", ws.Mountpoint(), "--verify", "--timeout", "60s",
		"--hdd", "1", "--hdd-ops", ops, "--hdd-bytes", "4M",
		"--dir", "1", "--dir-ops", ops,
		"--link", "1", "--link-ops", linkOps,
		"--symlink", "1", "--symlink-ops", linkOps,
		"--rename", "1", "--rename-ops", ops,
		"--dentry", "1", "--dentry-ops", ops,
		"--metrics-brief")
	if _, err := ws.Commit(context.Background(), "stress-ng"); err != nil {
		t.Fatal(err)
	}
}
