package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
)

// remoteRun is the fixed run with docker on a remote host (reached over
// SSH, as docker@ssh pins it), on a machine of sixteen CPUs and 64 GiB
// where this one has two and 8 GiB.
func remoteRun() (*manifests.RunPins, []manifests.Sample) {
	pins, samples := fixedRun()
	for i := range pins.Targets {
		if t := &pins.Targets[i]; t.Name == "docker" {
			t.Host, t.Transport, t.CPUs, t.MemoryBytes = "ssh://bench@gpu1:22", "ssh", 16, 64<<30
		}
	}
	return pins, samples
}

// TestHostsGroupAndWarn: the report groups the targets by host with
// their pins, warns (through the traits every other difference goes
// through) that targets on different hosts differ in CPUs and memory,
// and says next to the exec figures that docker's include SSH; in
// every format.
func TestHostsGroupAndWarn(t *testing.T) {
	pins, samples := remoteRun()
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: samples}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range r.Hosts {
		hosts = append(hosts, h.HostText()+": "+strings.Join(h.Targets, ",")+" "+h.Transport+" runner on "+h.RunnerText())
	}
	if got, want := strings.Join(hosts, "; "), "the run's own machine: local socket runner on the run's own machine; "+
		"the run's own machine: lima socket runner on the run's own machine; ssh://bench@gpu1:22: docker ssh runner on the run's own machine"; got != want {
		t.Errorf("hosts:\n%s\nwant\n%s", got, want)
	}
	warning := "Hosts differ in kernel, CPUs or memory (docker on ssh://bench@gpu1:22, local on the run's own machine, lima on the run's own machine)"
	if !hasPrefixIn(r.Summary.Warnings, warning) {
		t.Errorf("warnings %q: want one starting %q", r.Summary.Warnings, warning)
	}
	note := "docker's Engine was reached through ssh to ssh://bench@gpu1:22, not a local socket: its exec wall time and per-exec overhead include that transport."
	for _, m := range execMetrics {
		if tm := timing(r, m); tm == nil || !hasPrefixIn(tm.Notes, note) {
			t.Errorf("%s: notes %v, want %q", m, tm, note)
		}
	}
	if tm := timing(r, "commandNs"); hasPrefixIn(tm.Notes, note) {
		t.Errorf("the command time, on the Sandbox's clock, carries the transport's note: %q", tm.Notes)
	}
	if h := r.Summary.Headlines[0]; h.Target != "docker" || h.Transport != "ssh" || r.Summary.Headlines[1].Transport != "" {
		t.Errorf("headlines %+v: want docker's through ssh, local's with no transport", r.Summary.Headlines)
	}
	want := map[string][]string{
		"md": {"| 42.0 [42.0, 42.0], through ssh |", "| ssh://bench@gpu1:22 | docker | 6.1.0-40-amd64 | 16 | 64 GiB | the run's own machine | ssh |",
			"| the run's own machine | local | 6.1.0-40-amd64 | 2 | 8 GiB | the run's own machine | socket |", "- " + note, "  - " + warning},
		"html": {"per-exec overhead, median over cells, through ssh", "<td class=\"l\"><code>ssh://bench@gpu1:22</code></td><td class=\"l\">docker</td>", "<li>" + note + "</li>"},
		"csv":  {"target,,docker,host,ssh://bench@gpu1:22,", "target,,docker,engineTransport,ssh,", "target,,local,host,,"},
	}
	for format, wants := range want {
		var b bytes.Buffer
		if err := Write(&b, r, format); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		if format == "html" {
			text = strings.ReplaceAll(text, "&#39;", "'")
		}
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("the %s report lacks %q", format, w)
			}
		}
		if format == "md" {
			testenv.Golden(t, "report.golden.hosts.md", b.Bytes())
		}
	}
	var b bytes.Buffer
	if err := Write(&b, r, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Hosts) != 3 || back.Hosts[2].Host != "ssh://bench@gpu1:22" || back.Hosts[2].CPUs != 16 || back.Hosts[2].Transport != "ssh" ||
		back.Targets[0].Host != "ssh://bench@gpu1:22" || back.Summary.Headlines[0].Transport != "ssh" {
		t.Errorf("the JSON report's hosts %+v, targets %+v", back.Hosts, back.Targets)
	}
}

// TestHostsAlikeNoWarning: targets on different hosts whose kernels,
// CPUs and memory agree get no warning about their hosts (the transport
// is still noted), and targets on one host none either.
func TestHostsAlikeNoWarning(t *testing.T) {
	pins, samples := remoteRun()
	for i := range pins.Targets {
		if tp := &pins.Targets[i]; tp.Name == "docker" {
			tp.CPUs, tp.MemoryBytes = 2, 8<<30
		}
	}
	pins.Targets = pins.Targets[:2] // without lima, whose kernel differs
	var kept []manifests.Sample
	for _, s := range samples {
		if s.Target != "lima" {
			kept = append(kept, s)
		}
	}
	r, err := Build([]Input{{Source: "run", Pins: pins, Samples: kept}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Summary.Warnings {
		if strings.HasPrefix(w, "Hosts differ") {
			t.Errorf("a warning about hosts alike: %q", w)
		}
	}
	if !hasPrefixIn(r.Notes, "docker's Engine was reached through ssh") {
		t.Errorf("notes %q: want docker's transport", r.Notes)
	}
	one, _ := fixedRun()
	r, err = Build([]Input{{Source: "run", Pins: one, Samples: samples}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Summary.Warnings {
		if strings.HasPrefix(w, "Hosts differ") {
			t.Errorf("a warning about hosts, for targets on one: %q", w)
		}
	}
}

func hasPrefixIn(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
