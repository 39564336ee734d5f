package cmd

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
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
