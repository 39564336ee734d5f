package ledger

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sealbench/sealbench/manifests"
)

const runID = "20261202T093000-abcdef"

// The child processes of TestProcessesAppendAtOnce: LEDGER_TEST_CHILD is
// the ledger's directory and the child's name.
func TestMain(m *testing.M) {
	if dir, name := os.Getenv("LEDGER_TEST_DIR"), os.Getenv("LEDGER_TEST_CHILD"); dir != "" {
		if err := appendEntries(dir, name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const perProcess = 200

// appendEntries opens the ledger in dir and records perProcess containers
// of its own, and one that every process records.
func appendEntries(dir, name string) error {
	l, err := Open(dir)
	if err != nil {
		return err
	}
	defer l.Close()
	for i := range perProcess {
		if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceContainer, Key: name + "-" + strconv.Itoa(i), Engine: "unix:///e.sock"}); err != nil {
			return err
		}
		if i == perProcess/2 {
			if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceContainer, Key: "shared", Engine: "unix:///e.sock"}); err != nil {
				return err
			}
		}
	}
	return nil
}

// newLedger creates a ledger in a new directory, with the directory as
// its first entry.
func newLedger(t *testing.T) (*Ledger, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := Create(dir, runID)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: dir}); err != nil {
		t.Fatal(err)
	}
	return l, dir
}

// Several processes append to one ledger at once, as the runners of a
// run's groups do: every entry is there once, on a line of its own, with
// sequence numbers that rise, and one that all of them record is
// recorded once.
func TestProcessesAppendAtOnce(t *testing.T) {
	l, dir := newLedger(t)
	children := []string{"a", "b", "c"}
	var cmds []*exec.Cmd
	for _, name := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LEDGER_TEST_DIR="+dir, "LEDGER_TEST_CHILD="+name)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	// This process appends meanwhile too, through the ledger it created.
	if err := appendEntries(dir, "parent"); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a child: %v", err)
		}
	}
	// The ledger that created the file sees what the others appended.
	if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceContainer, Key: "a-0", Engine: "unix:///e.sock"}); err != nil {
		t.Fatal(err)
	}
	if got, want := len(l.Entries()), 1+(len(children)+1)*perProcess+1; got != want {
		t.Errorf("the creating ledger knows %d entries, want %d", got, want)
	}
	l.Close()

	entries, warnings, err := Read(dir) // checks that seq rises and the run id is one
	if err != nil || len(warnings) > 0 {
		t.Fatalf("reading the ledger: %v %v", err, warnings)
	}
	seen := map[string]int{}
	for i, e := range entries {
		seen[e.Key]++
		if e.Seq != i+1 {
			t.Errorf("entry %d (%s) has seq %d", i, e.Key, e.Seq)
		}
	}
	for _, name := range append(children, "parent") {
		for i := range perProcess {
			if k := name + "-" + strconv.Itoa(i); seen[k] != 1 {
				t.Errorf("%s is recorded %d times", k, seen[k])
			}
		}
	}
	if seen["shared"] != 1 {
		t.Errorf("the entry every process records is there %d times, want once", seen["shared"])
	}
	if len(entries) != 1+(len(children)+1)*perProcess+1 {
		t.Errorf("%d entries, want %d", len(entries), 1+(len(children)+1)*perProcess+1)
	}
}

// Open after a crash mid-line cuts the torn line, and appends go on
// after the last whole one.
func TestOpenCutsATornLine(t *testing.T) {
	l, dir := newLedger(t)
	l.Close()
	f, err := os.OpenFile(filepath.Join(dir, manifests.LedgerFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"formatVersion":1,"runId":"` + runID + `","seq":2,"ki`)
	f.Close()

	l, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceSocket, Key: filepath.Join(dir, "s.sock")}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	entries, warnings, err := Read(dir)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("reading the ledger: %v %v", err, warnings)
	}
	if len(entries) != 2 || entries[1].Seq != 2 || entries[1].Kind != manifests.ResourceSocket {
		t.Errorf("entries after the torn line: %+v", entries)
	}
}

// Refresh reads what another process appended, and cuts a line that a
// writer which died mid-write left, so that appends go on after the last
// whole one.
func TestRefreshReadsOthersAndCutsATornLine(t *testing.T) {
	l, dir := newLedger(t)
	defer l.Close()
	if err := appendEntries(dir, "other"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, manifests.LedgerFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"formatVersion":1,"runId":"` + runID + `","seq":999,"ki`)
	f.Close()
	if err := l.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(l.Entries()), 1+perProcess+1; got != want {
		t.Fatalf("after Refresh the ledger knows %d entries, want %d", got, want)
	}
	if err := l.Record(manifests.LedgerEntry{Kind: manifests.ResourceSocket, Key: filepath.Join(dir, "s.sock")}); err != nil {
		t.Fatal(err)
	}
	entries, warnings, err := Read(dir)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("reading the ledger: %v %v", err, warnings)
	}
	if last := entries[len(entries)-1]; len(entries) != 1+perProcess+2 || last.Seq != len(entries) || last.Kind != manifests.ResourceSocket {
		t.Errorf("%d entries, the last %+v", len(entries), last)
	}
}

// TestRetractTakesAnEntryBack: a retracted entry and its retraction are
// not standing, here, in another writer that catches up, and for Read; the
// same resource recorded again is a new standing entry; retracting a
// resource no entry names does nothing.
func TestRetractTakesAnEntryBack(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, runID)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	img := manifests.LedgerEntry{Target: "docker", Kind: manifests.ResourceImage, Key: "sha256:" + fmt.Sprintf("%064x", 1), Engine: "unix:///e.sock"}
	dirEntry := manifests.LedgerEntry{Target: "docker", Kind: manifests.ResourceDir, Key: "/x/docker"}
	if err := l.Record(dirEntry); err != nil {
		t.Fatal(err)
	}
	other, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := l.Record(img); err != nil {
		t.Fatal(err)
	}
	if err := l.Retract(img, "never made"); err != nil {
		t.Fatal(err)
	}
	if err := l.Retract(manifests.LedgerEntry{Kind: manifests.ResourceDir, Key: "/nowhere"}, "never made"); err != nil {
		t.Fatal(err)
	}
	standing := func(what string, es []manifests.LedgerEntry, want ...string) {
		t.Helper()
		var got []string
		for _, e := range es {
			got = append(got, e.Name())
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: standing %v, want %v", what, got, want)
		}
	}
	standing("the writer", l.Entries(), dirEntry.Name())
	if err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	standing("another writer, caught up", other.Entries(), dirEntry.Name())
	read, _, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	standing("Read", read, dirEntry.Name())
	// Loaded again, the image is a new entry, standing.
	if err := other.Record(img); err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(); err != nil {
		t.Fatal(err)
	}
	standing("after recording it again", l.Entries(), dirEntry.Name(), img.Name())
	if es := l.Entries(); es[1].Seq != 4 {
		t.Errorf("the image recorded again has seq %d, want 4 (after the entry and its retraction)", es[1].Seq)
	}
}
