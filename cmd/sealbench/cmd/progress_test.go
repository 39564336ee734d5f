package cmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// TestRunProgressInALog: in a log (not a terminal), a line when a cell is
// done on a target, saying how its samples went; a failed sample's own
// line always; every sample's line with -v.
func TestRunProgressInALog(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		var w bytes.Buffer
		rp := newRunProgress(newProgress(&w, "run"), 2, 1, 2, verbose)
		rp.status("local C01 1/4: timed run")
		feed := []manifests.SampleDone{
			{Target: "local", Cell: "C01", Round: 0, Status: manifests.StatusOK},
			{Target: "docker", Cell: "C01", Round: 0, Status: manifests.StatusFailed},
			{Target: "local", Cell: "C01", Round: 1, Status: manifests.StatusOK},
			{Target: "docker", Cell: "C01", Round: 1, Status: manifests.StatusOK},
		}
		for _, d := range feed {
			rp.sample(d, "LINE "+d.Target+" round "+string(rune('0'+d.Round))+" "+string(d.Status))
		}
		out := w.String()
		want := []string{"LINE docker round 0 failed"}
		if verbose {
			want = append(want, "LINE local round 0 ok", "LINE local round 1 ok", "LINE docker round 1 ok")
		} else {
			want = append(want, "C01 create 1,000 files done on local: 2 samples, ok", "C01 create 1,000 files done on docker: 2 samples, 1 failed")
		}
		for _, s := range want {
			if !strings.Contains(out, s) {
				t.Errorf("-v %v: no %q in\n%s", verbose, s, out)
			}
		}
		if !verbose && strings.Contains(out, "LINE local") {
			t.Errorf("a sample's own line without -v:\n%s", out)
		}
		if verbose && strings.Contains(out, "done on local") {
			t.Errorf("-v says each sample; the cell lines would repeat them:\n%s", out)
		}
		if n := strings.Count(out, "\n"); n != len(want) {
			t.Errorf("-v %v: %d lines, want %d:\n%s", verbose, n, len(want), out)
		}
	}
}

// TestRunProgressHead: the status line's head counts the samples done
// and says about how long the rest takes, from the pace so far.
func TestRunProgressHead(t *testing.T) {
	rp := newRunProgress(newProgress(&bytes.Buffer{}, "run"), 2, 12, 5, false)
	if got := rp.headLocked(); got != "0/120 samples" {
		t.Errorf("head before any sample: %q", got)
	}
	rp.started = time.Now().Add(-60 * time.Second)
	rp.done = 30
	got := rp.headLocked()
	// 2 s a sample so far, 90 to go: about 3 min (a slow machine running
	// this test may make it 4).
	if !strings.HasPrefix(got, "30/120 samples, about ") || !strings.HasSuffix(got, " min left") {
		t.Errorf("head: %q", got)
	}
	for d, want := range map[time.Duration]string{
		4 * time.Second:                 "10 s",
		44 * time.Second:                "40 s",
		8*time.Minute + 20*time.Second:  "8 min",
		80*time.Minute + 4*time.Second:  "1 h 20 min",
		125*time.Minute + 1*time.Second: "2 h 10 min",
	} {
		if got := roughDuration(d); got != want {
			t.Errorf("roughDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
