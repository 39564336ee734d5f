package kparam

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const param = "/sys/module/fuse/parameters/enable_uring"

// fake points SysRoot and Dir at directories of the test's, with param
// reading value, and returns what reads it.
func fake(t *testing.T, value string) (read func() string) {
	t.Helper()
	root := t.TempDir()
	oldRoot, oldDir := SysRoot, Dir
	SysRoot, Dir = root, filepath.Join(t.TempDir(), "kparam")
	t.Cleanup(func() { SysRoot, Dir = oldRoot, oldDir })
	p := filepath.Join(root, param)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() string {
		t.Helper()
		v, err := Read(param)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// runDir is a run directory that exists, and so holds.
func runDir(t *testing.T, name string) Holder {
	t.Helper()
	d := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return RunHolder(d)
}

func hold(t *testing.T, h Holder) string {
	t.Helper()
	was, err := Hold(param, "Y", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return was
}

func holders(t *testing.T) []Holder {
	t.Helper()
	hs, err := Holders(param)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestLastHolderPutsBack: two runs hold the parameter at once; the first
// to let go leaves it on for the other, which puts back what it was
// before either.
func TestLastHolderPutsBack(t *testing.T) {
	read := fake(t, "N")
	a, b := runDir(t, "a"), runDir(t, "b")
	if was := hold(t, a); was != "N" || read() != "Y" {
		t.Fatalf("a: was %s, now %s; want N, Y", was, read())
	}
	if was := hold(t, b); was != "N" {
		t.Fatalf("b joined a and was told it was %s, want N (what it read before a)", was)
	}
	others, err := Release(param, "Y", "N", a)
	if err != nil || len(others) != 1 || others[0] != b {
		t.Fatalf("a let go: others %v, %v; want [%v]", others, err, b)
	}
	if read() != "Y" {
		t.Fatalf("a let go while b holds: reads %s, want Y", read())
	}
	if others, err := Release(param, "Y", "N", b); err != nil || len(others) != 0 {
		t.Fatalf("b let go: others %v, %v", others, err)
	}
	if read() != "N" || len(holders(t)) != 0 {
		t.Fatalf("after the last let go: reads %s, holders %v; want N and none", read(), holders(t))
	}
	// Letting go again (a teardown tried twice) changes nothing.
	if _, err := Release(param, "Y", "N", b); err != nil || read() != "N" {
		t.Fatalf("letting go twice: %v, reads %s", err, read())
	}
}

// TestOnAlready: a parameter that read the value already is recorded as
// such, and left on by the last holder.
func TestOnAlready(t *testing.T) {
	read := fake(t, "Y")
	a := runDir(t, "a")
	if was := hold(t, a); was != "Y" {
		t.Fatalf("was %s, want Y", was)
	}
	if _, err := Release(param, "Y", "Y", a); err != nil || read() != "Y" {
		t.Fatalf("let go: %v, reads %s; want Y", err, read())
	}
}

// TestRecordFails: when the holder cannot record the change, nothing
// changes and nothing is held.
func TestRecordFails(t *testing.T) {
	read := fake(t, "N")
	boom := errors.New("disk full")
	_, err := Hold(param, "Y", runDir(t, "a"), func(string) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Hold: %v, want %v", err, boom)
	}
	if read() != "N" || len(holders(t)) != 0 {
		t.Fatalf("reads %s with holders %v; want N and none", read(), holders(t))
	}
	if _, err := os.Stat(booksOf(param).was()); !os.IsNotExist(err) {
		t.Fatalf("what it was is kept with no holder: %v", err)
	}
}

// TestChangedSince: the last holder leaves a parameter someone else
// changed since it was set, and says so.
func TestChangedSince(t *testing.T) {
	read := fake(t, "N")
	a := runDir(t, "a")
	hold(t, a)
	if err := write(param, "X"); err != nil {
		t.Fatal(err)
	}
	if _, err := Release(param, "Y", "N", a); !errors.Is(err, ErrChanged) || read() != "X" {
		t.Fatalf("let go: %v, reads %s; want ErrChanged and X", err, read())
	}
}

// TestLapsedHolders: a run directory removed without letting go, and a
// process that exited, hold no more; what the parameter was before them
// is still what the next holder is told to put back.
func TestLapsedHolders(t *testing.T) {
	read := fake(t, "N")
	a := runDir(t, "a")
	hold(t, a)
	if err := os.Remove(a.RunDir); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := startTime(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p := Holder{PID: sleep.Process.Pid, Start: start}
	hold(t, p)
	if hs := holders(t); len(hs) != 1 || hs[0] != p {
		t.Fatalf("holders %v, want only %v (a's directory is gone)", hs, p)
	}
	sleep.Process.Kill()
	sleep.Wait()
	if hs := holders(t); len(hs) != 0 {
		t.Fatalf("holders %v after the process exited, want none", hs)
	}
	if was, value, ok, err := Lapsed(param); err != nil || !ok || was != "N" || value != "Y" {
		t.Fatalf("Lapsed: %q %q %v %v; want N, Y, true", was, value, ok, err)
	}
	b := runDir(t, "b")
	if was := hold(t, b); was != "N" || read() != "Y" {
		t.Fatalf("after the lapsed holders: was %s, reads %s; want N (from before them), Y", was, read())
	}
	if _, _, ok, _ := Lapsed(param); ok {
		t.Fatal("Lapsed with b holding")
	}
	if err := os.Remove(b.RunDir); err != nil {
		t.Fatal(err)
	}
	if err := PutBack(param); err != nil || read() != "N" {
		t.Fatalf("PutBack after b lapsed too: %v, reads %s; want N", err, read())
	}
	if _, _, ok, err := Lapsed(param); ok || err != nil {
		t.Fatalf("Lapsed after PutBack: %v %v", ok, err)
	}
	// A pid that started at another time is another process.
	if (Holder{PID: os.Getpid(), Start: 1}).live() {
		t.Fatal("this pid with another start time counts as live")
	}
	if me, err := ProcessHolder(); err != nil || !me.live() {
		t.Fatalf("this process: %v, %v", me, err)
	}
}

// TestExclusive: Exclusive waits for the holders to let go, and while it
// is held no one else can hold.
func TestExclusive(t *testing.T) {
	read := fake(t, "N")
	a := runDir(t, "a")
	hold(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Exclusive(ctx, param, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "let go") {
		t.Fatalf("Exclusive with a holder: %v, want it to give up waiting", err)
	}
	if _, err := Release(param, "Y", "N", a); err != nil {
		t.Fatal(err)
	}
	unlock, err := Exclusive(context.Background(), param, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := Hold(param, "Y", runDir(t, "b"), nil)
		held <- err
	}()
	select {
	case err := <-held:
		t.Fatalf("Hold returned (%v) while Exclusive was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	if read() != "N" {
		t.Fatalf("reads %s under Exclusive, want N", read())
	}
	unlock()
	if err := <-held; err != nil || read() != "Y" {
		t.Fatalf("Hold after Exclusive: %v, reads %s", err, read())
	}
}
