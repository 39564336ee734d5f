package toolexec

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCommandKillsItsGroup: when ctx ends, the child and the process it
// started (as go build starts compilers) are killed, not the child alone;
// and a child's exit status comes through the guard.
func TestCommandKillsItsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := Command(ctx, "sh", "-c", `sleep 3600 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait`, pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for pid == 0 {
		time.Sleep(20 * time.Millisecond)
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	cancel()
	if err := cmd.Wait(); err == nil {
		t.Error("a killed command succeeded")
	}
	for deadline := time.Now().Add(time.Minute); running(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child's child %d outlived the cancelled command", pid)
		}
	}

	out, err := Command(context.Background(), "sh", "-c", "echo said; exit 3").Output()
	if string(out) != "said\n" || err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a child exiting 3: %q, %v", out, err)
	}
	if err := Command(context.Background(), "no-such-tool-anywhere").Run(); err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("a missing tool: %v", err)
	}
}

// running reports whether pid is a process that is not a zombie (an
// orphan's zombie waits for an init that may not reap it).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc (macOS): the signal check is all there is
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
