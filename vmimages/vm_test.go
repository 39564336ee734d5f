//go:build vmtest

// The VM image tests build a bootable disk (minutes, hundreds of MB) and boot
// it under QEMU, so they are kept out of the default run: `make test-vm`.

package vmimages

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

// TestVMImageBoots builds the amd64 VM image (or takes it from the cache,
// keyed by its lock), checks its digests, and boots it with QEMU under TCG
// (KVM hangs on our machines) until a login prompt appears on the serial
// console: the kernel, the initrd and the ext4 disk work together.
func TestVMImageBoots(t *testing.T) {
	testenv.NeedRoot(t)
	for _, tool := range []string{"mmdebstrap", "mkfs.ext4", "qemu-img"} {
		testenv.NeedCommand(t, tool)
	}
	qemu := testenv.NeedCommand(t, "qemu-system-x86_64")
	lock, lb, err := DefaultLock("vm", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	img, err := BuildVM(context.Background(), VMOptions{Lock: lock, LockBytes: lb, CacheDir: DefaultCacheDir(), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{VMDisk, VMKernel, VMInitrd} {
		b, err := os.ReadFile(img.Path(n) + ".sha256")
		if err != nil || !strings.HasPrefix(string(b), img.Files[n].Hex+"  "+n) {
			t.Errorf("%s.sha256: %q, %v", n, b, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-machine", "q35", "-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "2",
		"-nographic", "-no-reboot", "-nic", "none",
		"-kernel", img.Path(VMKernel), "-initrd", img.Path(VMInitrd), "-append", img.Cmdline+" panic=-1",
		"-drive", "file="+img.Path(VMDisk)+",if=virtio,format=qcow2,snapshot=on")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(out)
	var last []string
	for sc.Scan() {
		line := sc.Text()
		last = append(last, line)
		if len(last) > 30 {
			last = last[1:]
		}
		if strings.Contains(line, "login:") || strings.Contains(line, "Reached target") && strings.Contains(line, "Multi-User System") {
			return
		}
	}
	t.Fatalf("the VM did not reach multi-user within the deadline (%v); the console's last lines:\n%s", ctx.Err(), strings.Join(last, "\n"))
}
