package report

import (
	"cmp"
	"fmt"
	"github.com/sealbench/sealbench/manifests"
	"slices"
	"strings"
)

// ThisMachine is how the report names the machine that made a run, where
// a target's pins name no remote host (and where every runner has run so
// far).
const ThisMachine = "the run's own machine"

// HostInfo is one host's pins: the targets on it whose pins agree, with
// what those pins say of the machine under them and of the way there.
// A host whose targets differ (a VM beside the stand-in) has a HostInfo
// for each set of targets that agree.
type HostInfo struct {
	// Host is the remote host, ssh://user@host:port; empty for the
	// machine that made the run.
	Host        string   `json:"host,omitempty"`
	Targets     []string `json:"targets"`
	Kernel      string   `json:"kernel,omitempty"`
	CPUs        int      `json:"cpus,omitempty"`
	MemoryBytes int64    `json:"memoryBytes,omitempty"`
	// RunnerHost is where the runner that sampled them ran, as Host.
	RunnerHost string `json:"runnerHost,omitempty"`
	// Transport is how the runner reached their Engine: "socket",
	// "ssh", "msb-exec"; empty without pins.
	Transport string `json:"transport,omitempty"`
}

// HostText is the host as the report writes it.
func (h HostInfo) HostText() string { return hostText(h.Host) }

// RunnerText is where the runner ran, as the report writes it.
func (h HostInfo) RunnerText() string { return hostText(h.RunnerHost) }

// MemoryText is the memory in GiB, or a dash.
func (h HostInfo) MemoryText() string {
	return TargetInfo{TargetPins: manifests.TargetPins{MemoryBytes: h.MemoryBytes}}.MemoryText()
}

func hostText(host string) string { return cmp.Or(host, ThisMachine) }

// HostText is the host the target lives on, as the report writes it.
func (t TargetInfo) HostText() string { return hostText(t.Host) }

// transportText is the Engine's transport as pins record it, "socket"
// where they leave it empty; "" without pins.
func (t TargetInfo) transportText() string {
	if t.Engine == "" {
		return ""
	}
	return cmp.Or(t.Transport, "socket")
}

// buildHosts groups the targets by host (this machine first, then the
// remote hosts in order), and within a host by the pins they share.
func (r *Report) buildHosts() {
	r.Hosts = []HostInfo{}
	for _, t := range r.Targets {
		h := HostInfo{Host: t.Host, Kernel: t.Kernel, CPUs: t.CPUs, MemoryBytes: t.MemoryBytes, RunnerHost: t.RunnerHost, Transport: t.transportText()}
		i := slices.IndexFunc(r.Hosts, func(o HostInfo) bool {
			o.Targets = nil
			return o.Host == h.Host && o.Kernel == h.Kernel && o.CPUs == h.CPUs && o.MemoryBytes == h.MemoryBytes && o.RunnerHost == h.RunnerHost && o.Transport == h.Transport
		})
		if i < 0 {
			r.Hosts = append(r.Hosts, h)
			i = len(r.Hosts) - 1
		}
		r.Hosts[i].Targets = append(r.Hosts[i].Targets, t.Name)
	}
	slices.SortStableFunc(r.Hosts, func(a, b HostInfo) int {
		if (a.Host == "") != (b.Host == "") {
			if a.Host == "" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Host, b.Host)
	})
}

// machinesDiffer says whether two of ts on different hosts differ in
// kernel, CPUs or memory (where both know it): the condition of the
// "host" trait's warning.
func machinesDiffer(ts []TargetInfo) bool {
	for i, a := range ts {
		for _, b := range ts[i+1:] {
			if a.Host == b.Host || a.Engine == "" || b.Engine == "" {
				continue
			}
			if a.Kernel != b.Kernel || a.CPUs != b.CPUs || a.MemoryBytes != b.MemoryBytes {
				return true
			}
		}
	}
	return false
}

// transportNote says what a target's Engine transport adds to its exec
// figures, where it is not a local socket: "" otherwise.
func (t TargetInfo) transportNote() string {
	tr := t.transportText()
	if tr == "" || tr == "socket" {
		return ""
	}
	where := ""
	if t.Host != "" {
		where = " to " + t.Host
	}
	return fmt.Sprintf("%s's Engine was reached through %s%s, not a local socket: its exec wall time and per-exec overhead include that transport.", t.Name, tr, where)
}

// execMetrics are the timings a transport's cost is part of.
var execMetrics = []string{"execWallNs", "execOverheadNs"}

// noteExecTransports puts each target's transportNote next to the exec
// figures: in the exec timings' notes, and on its headline.
func (r *Report) noteExecTransports() {
	var notes []string
	for _, t := range r.Targets {
		if n := t.transportNote(); n != "" {
			notes = append(notes, n)
		}
	}
	for i := range r.Timings {
		if slices.Contains(execMetrics, r.Timings[i].Metric) {
			r.Timings[i].Notes = append(r.Timings[i].Notes, notes...)
		}
	}
}

// transportText is ", through TRANSPORT" where the headline's exec
// overhead includes a transport, "" otherwise.
// warmText says, after the time to a usable Sandbox, that it is a
// claim's on a warm pool, for a target whose Sandboxes were claimed.
func (h Headline) warmText() string {
	if h.WarmPool == 0 || h.ReadyNs == nil {
		return ""
	}
	return fmt.Sprintf(", claimed from a warm pool of %d", h.WarmPool)
}

func (h Headline) transportText() string {
	if h.Transport == "" || h.ExecOverheadNs == nil {
		return ""
	}
	return ", through " + h.Transport
}
