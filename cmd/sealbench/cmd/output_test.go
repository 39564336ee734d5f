//go:build !sealbench_bundle

package cmd

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// TestReportOutNeverDestroys: report --out streams into a fifo and a
// character device and leaves each what it was; follows a symlink,
// writing what it names and keeping the link; refuses a symlink that
// names nothing, a directory behind a symlink, and an input of its own
// reached through a symlink, changing nothing.
func TestReportOutNeverDestroys(t *testing.T) {
	code, want, stderr := run(t, "report", reportRun)
	if code != ExitOK {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(syscall.Mkfifo(p("fifo.md"), 0o644))
	mustDo(os.WriteFile(p("real.md"), []byte("old"), 0o644))
	mustDo(os.Symlink("real.md", p("link.md")))
	mustDo(os.Symlink("fifo.md", p("to-fifo.md")))
	mustDo(os.Symlink("none.md", p("dangling.md")))
	mustDo(os.Mkdir(p("d"), 0o755))
	mustDo(os.Symlink("d", p("to-dir.md")))
	samples, err := filepath.Abs(filepath.Join(reportRun, manifests.SamplesFile))
	mustDo(err)
	mustDo(os.Symlink(samples, p("to-samples.md")))

	// reading drains the fifo once, in the background, as a reader would.
	reading := func() <-chan string {
		got := make(chan string, 1)
		go func() {
			b, _ := os.ReadFile(p("fifo.md"))
			got <- string(b)
		}()
		return got
	}
	for _, out := range []string{"fifo.md", "to-fifo.md"} {
		got := reading()
		code, _, stderr := run(t, "report", reportRun, "--out", p(out))
		if fi, err := os.Lstat(p("fifo.md")); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
			// Its reader waits on a fifo no one can name any more.
			t.Fatalf("report --out %s (exit %d) replaced the fifo: %v %v", out, code, fi.Mode(), err)
		}
		if code != ExitOK {
			t.Errorf("report --out %s: exit %d\n%s", out, code, stderr)
			os.WriteFile(p("fifo.md"), nil, 0) // let the reader go
		}
		if s := <-got; s != want {
			t.Errorf("report --out %s: the fifo's reader got %d bytes, want the report's %d", out, len(s), len(want))
		}
	}
	if code, _, stderr := run(t, "report", reportRun, "--out", p("link.md")); code != ExitOK {
		t.Errorf("report --out a symlink: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(p("real.md")); string(b) != want {
		t.Errorf("report --out a symlink: the file it names holds %d bytes, want the report", len(b))
	}
	for _, c := range []struct{ out, say string }{
		{"dangling.md", "does not exist"},
		{"to-dir.md", "is a directory"},
		{"to-samples.md", "which this command reads"},
	} {
		code, _, stderr := run(t, "report", reportRun, "--out", p(c.out))
		if code != ExitUnusable || !strings.Contains(stderr, c.say) || !strings.Contains(stderr, "\nhint: ") {
			t.Errorf("report --out %s: exit %d, want %d saying %q, with a hint\n%s", c.out, code, ExitUnusable, c.say, stderr)
		}
	}
	if _, err := os.Lstat(p("none.md")); err == nil {
		t.Error("report --out a dangling symlink created what it names")
	}
	for name, want := range map[string]fs.FileMode{"fifo.md": fs.ModeNamedPipe, "link.md": fs.ModeSymlink, "to-fifo.md": fs.ModeSymlink,
		"dangling.md": fs.ModeSymlink, "to-dir.md": fs.ModeSymlink, "to-samples.md": fs.ModeSymlink} {
		if fi, err := os.Lstat(p(name)); err != nil || fi.Mode().Type() != want {
			t.Errorf("%s after the reports: %v %v, want it still a %v", name, fi.Mode().Type(), err, want)
		}
	}
	if b, _ := os.ReadFile(samples); len(b) == 0 {
		t.Error("the samples are gone")
	}
}

// TestReportOutIntoADevice: a character device (made here, as /dev/null's
// twin) is written into, never replaced by a file.
func TestReportOutIntoADevice(t *testing.T) {
	testenv.NeedRoot(t)
	null := filepath.Join(t.TempDir(), "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // 1:3, /dev/null
		testenv.Skip(t, "cannot make a device node here: %v", err)
	}
	if code, _, stderr := run(t, "report", reportRun, "--out", null); code != ExitOK {
		t.Errorf("report --out a character device: exit %d\n%s", code, stderr)
	}
	if fi, err := os.Lstat(null); err != nil || fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
		t.Errorf("the device after report --out: %v %v, want a character device", fi.Mode(), err)
	}
}

// TestReportEscapesControlCharacters: text the results bring (here a
// tool's version in the pins) is shown with its control characters
// escaped in every text format, on stdout and in --out; JSON escapes them
// itself.
func TestReportEscapesControlCharacters(t *testing.T) {
	dir := runWithGitVersion(t, "2.39.5\x1b]0;owned\x07\x1b[2J\x1b[31m")
	for _, format := range []string{"md", "html", "json"} { // csv carries no tool versions
		code, stdout, stderr := run(t, "report", dir, "--format", format)
		if code != ExitOK {
			t.Fatalf("report --format %s: exit %d\n%s", format, code, stderr)
		}
		out := filepath.Join(t.TempDir(), "r."+format)
		if code, _, stderr := run(t, "report", dir, "--out", out); code != ExitOK {
			t.Fatalf("report --out %s: exit %d\n%s", out, code, stderr)
		}
		written, _ := os.ReadFile(out)
		for where, s := range map[string]string{"stdout": stdout, "--out": string(written)} {
			if strings.ContainsAny(s, "\x1b\x07") {
				t.Errorf("report --format %s on %s holds raw control characters", format, where)
			}
			if format != "json" && !strings.Contains(s, `\x1b`) {
				t.Errorf("report --format %s on %s does not show the version's escape sequence escaped", format, where)
			}
		}
	}
}

// TestReportCompareWithItself: comparing a run with itself (or with a
// copy) is allowed but warned about: no change is shown by construction.
func TestReportCompareWithItself(t *testing.T) {
	copied := t.TempDir()
	for _, n := range []string{manifests.SamplesFile, manifests.PinsFile} {
		b, _ := os.ReadFile(filepath.Join(reportRun, n))
		os.WriteFile(filepath.Join(copied, n), b, 0o644)
	}
	for _, other := range []string{reportRun, copied} {
		code, _, stderr := run(t, "report", "--compare", reportRun, other)
		if code != ExitOK || !strings.Contains(stderr, "warning: OLD") || !strings.Contains(stderr, "hold the same samples") {
			t.Errorf("report --compare %s %s: exit %d, want 0 with a warning\n%s", reportRun, other, code, stderr)
		}
	}
}

// TestAuditEscapesNames: a leftover whose name carries an escape sequence
// (a directory under the runs, named by whoever made it) is listed with
// the sequence shown, not obeyed.
func TestAuditEscapesNames(t *testing.T) {
	state := shortStateDir(t)
	if err := os.MkdirAll(filepath.Join(runs.RunsDir(state), "evil\x1b[2J\x1b]0;owned\x07"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "audit", "--target", "local")
	if code != ExitMismatch || strings.ContainsAny(stdout+stderr, "\x1b\x07") || !strings.Contains(stdout, `evil\x1b[2J\x1b]0;owned\a`) {
		t.Errorf("audit: exit %d, want %d listing the directory with its escape sequences escaped\nstdout %q\nstderr %q", code, ExitMismatch, stdout, stderr)
	}
}
