package cmd

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
)

// progress reports the steps of a long operation on stderr: on a terminal,
// each line with the elapsed time and a ticking clock while a step runs; in
// a log, plain timestamped lines.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	cmd    string
	tty    bool
	start  time.Time
	last   string
	ticker *time.Ticker
	done   chan struct{}
}

func newProgress(w io.Writer, cmd string) *progress {
	p := &progress{w: w, cmd: cmd, start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
		p.ticker = time.NewTicker(time.Second)
		p.done = make(chan struct{})
		go p.tick()
	}
	return p
}

func (p *progress) tick() {
	for {
		select {
		case <-p.done:
			return
		case <-p.ticker.C:
			p.mu.Lock()
			if p.last != "" {
				fmt.Fprintf(p.w, "\r\033[K[%5.1fs] %s ...", time.Since(p.start).Seconds(), p.last)
			}
			p.mu.Unlock()
		}
	}
}

// Logf prints one step.
func (p *progress) Logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K[%5.1fs] %s\n", time.Since(p.start).Seconds(), msg)
		p.last = msg
		return
	}
	fmt.Fprintf(p.w, "%s sealbench %s: %s\n", time.Now().UTC().Format(time.RFC3339), p.cmd, msg)
}

// Close stops the clock and clears its line.
func (p *progress) Close() {
	if !p.tty {
		return
	}
	p.ticker.Stop()
	close(p.done)
	p.mu.Lock()
	if p.last != "" {
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.mu.Unlock()
}

// Status shows what is under way on a terminal's ticking line, without a
// line of its own; in a log it prints nothing (Logf lines say enough).
func (p *progress) Status(msg string) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = msg
	fmt.Fprintf(p.w, "\r\033[K[%5.1fs] %s ...", time.Since(p.start).Seconds(), msg)
}

// runProgress follows a run's samples for the console: on a terminal the
// ticking line says how many are done of how many, about how long the
// rest will take, and what is under way; in a log, a line says when a
// cell is done on a target. Every sample's own line is shown only when
// verbose, or when the sample failed.
type runProgress struct {
	p       *progress
	verbose bool
	total   int // samples in the run
	perCell int // samples of a cell on a target

	mu      sync.Mutex
	started time.Time // the first sample's start: the runner's first status
	done    int
	cells   map[[2]string]int // finished samples by target and cell
	failed  map[[2]string]int
}

func newRunProgress(p *progress, targets, cells, samples int, verbose bool) *runProgress {
	return &runProgress{p: p, verbose: verbose, total: targets * cells * samples, perCell: samples,
		cells: map[[2]string]int{}, failed: map[[2]string]int{}}
}

// status shows the runner's status (the sample under way and its phase)
// after the run's progress.
func (r *runProgress) status(msg string) {
	r.mu.Lock()
	if r.started.IsZero() {
		r.started = time.Now()
	}
	head := r.headLocked()
	r.mu.Unlock()
	r.p.Status(head + " · " + msg)
}

// headLocked is "12/120 samples, about 8 min left".
func (r *runProgress) headLocked() string {
	head := fmt.Sprintf("%d/%d samples", r.done, r.total)
	if r.done > 0 && r.done < r.total {
		left := time.Since(r.started) / time.Duration(r.done) * time.Duration(r.total-r.done)
		head += ", about " + roughDuration(left) + " left"
	}
	return head
}

// sample hears a finished sample.
func (r *runProgress) sample(d manifests.SampleDone, line string) {
	k := [2]string{d.Target, d.Cell}
	failed := d.Status != manifests.StatusOK && d.Status != manifests.StatusIneligible
	r.mu.Lock()
	r.done++
	if d.Precision {
		// The precision rule's rounds come on top of the planned ones.
		r.total++
	}
	r.cells[k]++
	if failed {
		r.failed[k]++
	}
	cellDone := r.cells[k] == r.perCell
	nfailed := r.failed[k]
	r.mu.Unlock()
	switch {
	case r.verbose || failed:
		r.p.Logf("%s", line)
	case cellDone && !r.p.tty:
		r.p.Logf("%s %s done on %s: %s", d.Cell, cellTitle(d.Cell), d.Target, samplesText(r.perCell, nfailed))
	}
}

// samplesText is "5 samples, all ok" or "5 samples, 2 failed".
func samplesText(n, failed int) string {
	s := fmt.Sprintf("%d samples", n)
	if n == 1 {
		s = "1 sample"
	}
	if failed > 0 {
		return fmt.Sprintf("%s, %d failed", s, failed)
	}
	return s + ", ok"
}

// cellTitle is a cell's title, or "" for a code that names none.
func cellTitle(code string) string {
	if c, err := cells.Lookup(code); err == nil {
		return c.Title
	}
	return ""
}

// roughDuration writes d as a person would say it: "40 s", "8 min",
// "1 h 20 min".
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", max(10, int(d.Round(10*time.Second).Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute).Minutes()))
	}
	d = d.Round(10 * time.Minute)
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}
