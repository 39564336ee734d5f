package report

import (
	"fmt"
	"io"
	"strings"
)

// WriteConsole writes what a terminal shows at the end of a run: the
// report's summary in plain lines (no Markdown), one line per target with
// its headline values, and the line that says what the values are. The
// tables, counts and notes are in the report files.
func WriteConsole(w io.Writer, r *Report) error {
	o := r.Summary
	var b strings.Builder
	line := func(label, text string) { fmt.Fprintf(&b, "%-9s%s\n", label+":", text) }
	line("Ran", o.ranText())
	line("Counts", o.countsVerdict())
	if aa := o.aaText(); aa != "" {
		line("Noise", aa)
	}
	for _, m := range r.machineLines() {
		line("Machine", m)
	}
	if lines := r.signatureLines(); lines != nil {
		line("Signed", strings.Join(lines, "; "))
	}
	for _, wn := range o.Warnings {
		line("Warning", wn)
	}
	names := r.TargetNames()
	multi := len(names) > 1
	width := 0
	for _, h := range o.Headlines {
		width = max(width, len(targetLabel(h, multi)))
	}
	for _, h := range o.Headlines {
		parts := []string{"LayerFS over native " + headlineValue(h.LayerFSOverNative, times, ratio)}
		if multi && !h.Baseline {
			parts = append(parts, "command time vs "+r.Baseline+" "+headlineValue(h.CommandVsBaseline, times, ratio))
		}
		parts = append(parts, "per-exec overhead "+headlineValue(h.ExecOverheadNs, ms, ms)+" ms"+h.transportText())
		if h.ReadyNs != nil {
			parts = append(parts, "a usable Sandbox in "+headlineValue(h.ReadyNs, ms, ms)+" ms"+h.warmText())
		}
		fmt.Fprintf(&b, "%-*s  %s\n", width, targetLabel(h, multi), strings.Join(parts, "; "))
		for _, sh := range h.Suites {
			parts := []string{"LayerFS over native " + headlineValue(sh.LayerFSOverNative, times, ratio)}
			if multi && !h.Baseline {
				parts = append(parts, "command time vs "+r.Baseline+" "+headlineValue(sh.CommandVsBaseline, times, ratio))
			}
			fmt.Fprintf(&b, "%-*s    %s: %s\n", width, "", sh.Suite, strings.Join(parts, "; "))
		}
	}
	b.WriteString(r.headline() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// targetLabel names a headline's target, the baseline marked so.
func targetLabel(h Headline, multi bool) string {
	if h.Baseline && multi {
		return h.Target + " (baseline)"
	}
	return h.Target
}
