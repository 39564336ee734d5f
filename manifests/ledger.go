package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The ledger format: a run directory holds LedgerFile, one LedgerEntry per
// line (JSON Lines), appended and fsync'd BEFORE the resource it names is
// created, so that a crash at any point leaves a ledger that names
// everything that may exist. Teardown walks it in reverse.
const (
	// LedgerFormatVersion is the ledger line format this code writes and reads.
	LedgerFormatVersion = 1
	// LedgerFile is the ledger's name in a run directory.
	LedgerFile = "ledger.jsonl"
	// RunLabel is the label every labelled resource of a run carries, with
	// the run id as its value: sealbench.run=<run id>.
	RunLabel = "sealbench.run"
	// MaxLedgerLine bounds one ledger line.
	MaxLedgerLine = 64 << 10
	// MaxLedgerEntries bounds how many lines a ledger may have.
	MaxLedgerEntries = 1 << 16
)

// ResourceKind says what a ledger entry names, and so how its key is read
// and how teardown removes it.
type ResourceKind string

// The resource kinds. Path kinds have an absolute path as their key.
const (
	ResourceDir       ResourceKind = "dir"       // a directory we made (the run directory, say); key: its path
	ResourceStateDir  ResourceKind = "stateDir"  // a stand-in's state directory; key: its path
	ResourceSocket    ResourceKind = "socket"    // a unix socket; key: its path
	ResourceStore     ResourceKind = "store"     // a LayerFS Store; key: its directory
	ResourceMount     ResourceKind = "mount"     // a mount (FUSE or other); key: the mount point
	ResourceProcess   ResourceKind = "process"   // a process of ours; key: a unique argument in its argv
	ResourceContainer ResourceKind = "container" // a container; key: its name; engine: its endpoint
	ResourceImage     ResourceKind = "image"     // an image the run loaded; key: its id (sha256:...); engine: its endpoint
	ResourceVolume    ResourceKind = "volume"    // a volume; key: its name; engine: its endpoint
	// ResourceVM is a virtual machine, or a VM-backed container, that a
	// target's own tool manages (limactl, Apple's container, msb); key: its
	// name; exe: the tool. Only the target's provisioner removes it.
	ResourceVM ResourceKind = "vm"
	// ResourceKernelParam is a kernel parameter the run changed (the fuse
	// module's enable_uring, held for a run by --fuse-uring); key: its path,
	// /sys/module/<module>/parameters/<name>; value: what the run writes;
	// previous: what it read before. It is the host's, not a target's
	// (no target), and is recorded before the parameter is written;
	// teardown writes previous back while the parameter still reads value.
	ResourceKernelParam ResourceKind = "kernelParam"
	// ResourceKubeObject is an object the run made through a Kubernetes
	// API server other than a Sandbox's pod (a container entry names
	// that): key RESOURCE/NAMESPACE/NAME, as networkpolicies/default/x;
	// the cluster is the one the target's record in the run directory
	// names.
	ResourceKubeObject ResourceKind = "kubeObject"
)

// ResourceKinds lists every kind, in the order of the constants.
var ResourceKinds = []ResourceKind{
	ResourceDir, ResourceStateDir, ResourceSocket, ResourceStore, ResourceMount,
	ResourceProcess, ResourceContainer, ResourceImage, ResourceVolume, ResourceVM,
	ResourceKernelParam, ResourceKubeObject,
}

// IsPath reports whether the kind's key is a filesystem path.
func (k ResourceKind) IsPath() bool {
	switch k {
	case ResourceDir, ResourceStateDir, ResourceSocket, ResourceStore, ResourceMount:
		return true
	}
	return false
}

// OnEngine reports whether the resource lives in an Engine (dockerd or
// the stand-in), named by the entry's Engine endpoint.
func (k ResourceKind) OnEngine() bool {
	return k == ResourceContainer || k == ResourceImage || k == ResourceVolume
}

func (k ResourceKind) valid() bool {
	for _, v := range ResourceKinds {
		if k == v {
			return true
		}
	}
	return false
}

// LedgerEntry is one resource a run creates, recorded before it exists.
type LedgerEntry struct {
	FormatVersion int          `json:"formatVersion"`
	RunID         string       `json:"runId"`
	Seq           int          `json:"seq"` // from 1, one more on every line
	Time          time.Time    `json:"time"`
	Target        string       `json:"target,omitempty"` // local, docker...; empty for the run's own directory
	Kind          ResourceKind `json:"kind"`
	Key           string       `json:"key"`
	// Engine is the Engine API endpoint (unix:///..., tcp://...) holding a
	// container, image or volume.
	Engine string `json:"engine,omitempty"`
	// Host is the remote host the resource lives on, ssh://user@host:port
	// (docs/design/remote-hosts.md); empty for this host. On a remote
	// host a path is that host's, and Engine the endpoint as seen there.
	Host string `json:"host,omitempty"`
	// Exe is, for a process, the path of the binary it runs: teardown
	// matches a process by its argv (Exe first, Key among the rest), never
	// by a pid alone. For a VM, and for a container, image or volume with
	// no Engine, it is the target's tool that holds it (limactl,
	// container, msb).
	Exe string `json:"exe,omitempty"`
	// Labels are the labels the resource is created with, where the
	// backend has labels; they include RunLabel.
	Labels map[string]string `json:"labels,omitempty"`
	// Value and Previous are, for a kernel parameter only, what the run
	// writes and what the parameter read before: both recorded, even when
	// equal (the change is then a no-op, recorded so that the pins are
	// honest and teardown has nothing to put back).
	Value    string `json:"value,omitempty"`
	Previous string `json:"previous,omitempty"`
	Detail   string `json:"detail,omitempty"` // what it is for, in words
	// Retracts, when not 0, makes the line a retraction: the resource of
	// the earlier entry with that seq (the same target, kind, key, engine
	// and host) was never made, because its create failed before anything
	// of it could exist (an image load the Engine refused, whose image the
	// Engine then does not have). Teardown and the audit pass both lines
	// (Standing). Record-before-create stays the rule: only a create that
	// failed with nothing made is retracted, never one that may have made
	// something.
	Retracts int `json:"retracts,omitempty"`
}

// SameResource reports whether e and o name the same resource: target,
// kind, key, Engine and host.
func (e *LedgerEntry) SameResource(o *LedgerEntry) bool {
	return e.Target == o.Target && e.Kind == o.Kind && e.Key == o.Key && e.Engine == o.Engine && e.Host == o.Host
}

// Standing returns entries without the retractions and the entries they
// retract: what may exist.
func Standing(entries []LedgerEntry) []LedgerEntry {
	gone := map[int]bool{}
	for _, e := range entries {
		if e.Retracts > 0 {
			gone[e.Retracts] = true
		}
	}
	if len(gone) == 0 {
		return entries
	}
	out := make([]LedgerEntry, 0, len(entries))
	for _, e := range entries {
		if e.Retracts == 0 && !gone[e.Seq] {
			out = append(out, e)
		}
	}
	return out
}

// Name is how messages name the entry's resource: "process <key>".
func (e *LedgerEntry) Name() string { return string(e.Kind) + " " + e.Key }

// kernelParamPattern is the only kind of kernel parameter a ledger may
// name: a module parameter in sysfs. Teardown writes to it as root, so a
// ledger cannot point that write anywhere else.
var kernelParamPattern = regexp.MustCompile(`^/sys/module/[A-Za-z0-9_]+/parameters/[A-Za-z0-9_]+$`)

// kubeObjectPattern is a Kubernetes object's ledger key: a resource (its
// plural, lowercase), a namespace (a DNS label) and a name (a DNS
// subdomain).
var kubeObjectPattern = regexp.MustCompile(`^[a-z]+/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)

// kernelParamValuePattern is what a recorded kernel parameter value may
// be: one short word (Y, N, 1, 0, a number), as sysfs prints it trimmed.
var kernelParamValuePattern = regexp.MustCompile(`^[A-Za-z0-9_.,:-]{1,64}$`)

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidateRunID checks a run id: letters, digits, '.', '_', '-', at most 64.
func ValidateRunID(id string) error {
	if !runIDPattern.MatchString(id) {
		return fmt.Errorf("%q is not a run id (letters, digits, '.', '_', '-'; at most 64)", id)
	}
	return nil
}

// FillDefaults sets what an entry may leave out: the format version, and
// the run label on labelled kinds.
func (e *LedgerEntry) FillDefaults() {
	if e.FormatVersion == 0 {
		e.FormatVersion = LedgerFormatVersion
	}
	if (e.Kind == ResourceContainer || e.Kind == ResourceVolume) && e.Labels == nil {
		e.Labels = map[string]string{RunLabel: e.RunID}
	}
}

// Validate reports every problem with the entry, each naming its field.
func (e *LedgerEntry) Validate() error {
	p := &problems{doc: "ledger entry"}
	e.validate(p)
	return p.err()
}

func (e *LedgerEntry) validate(p *problems) {
	if e.FormatVersion != LedgerFormatVersion {
		p.addf("formatVersion", "is %d, want %d", e.FormatVersion, LedgerFormatVersion)
	}
	if err := ValidateRunID(e.RunID); err != nil {
		p.addf("runId", "%v", err)
	}
	if e.Seq < 1 {
		p.addf("seq", "is %d, want 1 or more", e.Seq)
	}
	if e.Time.IsZero() {
		p.addf("time", "missing")
	}
	if e.Retracts < 0 || e.Retracts > 0 && e.Retracts >= e.Seq {
		p.addf("retracts", "is %d: a retraction names an earlier entry's seq (1 to %d)", e.Retracts, e.Seq-1)
	}
	if e.Target != "" && !runIDPattern.MatchString(e.Target) {
		p.addf("target", "%q is not a target name", e.Target)
	}
	if !e.Kind.valid() {
		p.addf("kind", "%q is not a resource kind (one of %v)", e.Kind, ResourceKinds)
	}
	switch {
	case e.Key == "":
		p.addf("key", "missing")
	case strings.ContainsAny(e.Key, "\x00\n"):
		p.addf("key", "contains a NUL or a newline")
	case e.Kind.IsPath() && (!filepath.IsAbs(e.Key) || filepath.Clean(e.Key) != e.Key || e.Key == "/"):
		p.addf("key", "%q: a %s is named by an absolute, clean path other than /", e.Key, e.Kind)
	case e.Kind == ResourceImage && e.Exe == "":
		if _, err := ParseDigest(e.Key); err != nil {
			p.addf("key", "an image in an Engine is named by its id: %v", err)
		}
	case e.Kind == ResourceProcess && len(e.Key) < 8:
		p.addf("key", "%q: a process marker must be unique on the host (8 characters or more)", e.Key)
	case e.Kind == ResourceKernelParam && !kernelParamPattern.MatchString(e.Key):
		p.addf("key", "%q: a kernel parameter is named by its path, /sys/module/<module>/parameters/<name>", e.Key)
	case e.Kind == ResourceKubeObject && !kubeObjectPattern.MatchString(e.Key):
		p.addf("key", "%q: a Kubernetes object is named RESOURCE/NAMESPACE/NAME (networkpolicies/default/x)", e.Key)
	}
	if e.Host != "" {
		if err := ValidateSSHHost(e.Host); err != nil {
			p.addf("host", "%v", err)
		}
	}
	if e.Kind == ResourceKernelParam {
		if e.Host != "" {
			p.addf("host", "%q set on a kernel parameter, which only this host's runs change", e.Host)
		}
		if e.Target != "" {
			p.addf("target", "%q set on a kernel parameter, which is the host's, not one target's", e.Target)
		}
		for _, f := range []struct{ name, v string }{{"value", e.Value}, {"previous", e.Previous}} {
			if !kernelParamValuePattern.MatchString(f.v) {
				p.addf(f.name, "%q: a kernel parameter's %s is one word of letters, digits and _.,:- (1 to 64), as sysfs prints it", f.v, f.name)
			}
		}
	} else {
		if e.Value != "" {
			p.addf("value", "set on a %s; only a kernel parameter has one", e.Kind)
		}
		if e.Previous != "" {
			p.addf("previous", "set on a %s; only a kernel parameter has one", e.Kind)
		}
	}
	// Where the resource lives: an Engine (containers, images, volumes),
	// or a target's own tool (Exe: VMs, and the images and volumes such a
	// tool holds), or the host (Exe of a process: its binary).
	toolHeld := e.Kind.OnEngine() && e.Engine == "" && e.Exe != ""
	switch {
	case e.Kind.OnEngine() && !toolHeld:
		if !strings.HasPrefix(e.Engine, "unix:///") && !strings.HasPrefix(e.Engine, "tcp://") {
			p.addf("engine", "%q: a %s needs its Engine endpoint (unix:///... or tcp://...), or exe: the tool that holds it", e.Engine, e.Kind)
		}
		if e.Exe != "" {
			p.addf("exe", "set on a %s in an Engine", e.Kind)
		}
	case e.Engine != "" && !e.Kind.OnEngine():
		p.addf("engine", "set on a %s, which does not live in an Engine", e.Kind)
	}
	switch {
	case e.Kind == ResourceProcess, e.Kind == ResourceVM, toolHeld:
		if !filepath.IsAbs(e.Exe) {
			p.addf("exe", "%q: a %s needs the absolute path of its binary or tool", e.Exe, e.Kind)
		}
	case e.Exe != "" && !e.Kind.OnEngine():
		p.addf("exe", "set on a %s", e.Kind)
	}
	if (e.Kind == ResourceContainer || e.Kind == ResourceVolume) && !toolHeld {
		if got := e.Labels[RunLabel]; got != e.RunID {
			p.addf("labels", "a %s must carry %s=%s (has %q)", e.Kind, RunLabel, e.RunID, got)
		}
	}
}

// sshUserPattern is a login name as a remote host's spec takes it.
var sshUserPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$`)

// sshHostPattern is a lowercase DNS name.
var sshHostPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// ValidateSSHHost checks a remote host in the canonical form the ledger
// and hosts.json record: ssh://user@host:port, the port always written,
// the host lowercase, an IPv6 address in brackets, nothing else.
func ValidateSSHHost(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("%q is not a host as ssh://user@host:port: %s", s, why)
	}
	rest, ok := strings.CutPrefix(s, "ssh://")
	if !ok {
		return bad("not ssh://")
	}
	user, hostPort, ok := strings.Cut(rest, "@")
	if !ok || !sshUserPattern.MatchString(user) {
		return bad("no user, or not a login name")
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return bad(err.Error())
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return bad("the port is not 1 to 65535")
	}
	if ip := net.ParseIP(host); ip != nil {
		v6 := ip.To4() == nil
		if v6 != strings.HasPrefix(hostPort, "[") || !v6 && ip.String() != host {
			return bad("an address not in its usual form (IPv6 in brackets)")
		}
		return nil
	}
	if len(host) > 253 || !sshHostPattern.MatchString(host) {
		return bad("the host is not a lowercase name or an address")
	}
	return nil
}

// ToolHeld reports whether e names a container, image or volume held by a
// target's own tool (Exe) rather than by an Engine.
func (e *LedgerEntry) ToolHeld() bool {
	return e.Kind.OnEngine() && e.Engine == "" && e.Exe != ""
}

// MarshalLine encodes e as one ledger line: compact JSON and a newline.
func (e *LedgerEntry) MarshalLine() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("encoding ledger entry %s: %w", e.Name(), err)
	}
	if b.Len() > MaxLedgerLine {
		return nil, fmt.Errorf("ledger entry %s is longer than %d bytes", e.Name(), MaxLedgerLine)
	}
	return b.Bytes(), nil
}

// LineError is a problem at one line of a file with one record a line: a
// ledger, a samples file.
type LineError struct {
	File string // what the file is, for the message ("ledger"); may be empty
	Line int    // from 1
	Err  error
}

func (e *LineError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("%s line %d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ErrLedgerTruncated is the warning ReadLedger gives for a last line cut
// off mid-write: the process writing it was stopped (a crash, kill -9).
// The resource of that line was never created, since creation waits for
// the fsync'd line.
var ErrLedgerTruncated = errors.New("the last line is cut off (no newline at the end): the run was stopped while recording a resource, which was therefore never created")

// ReadLedger reads a ledger strictly: every line one complete entry of
// this format version, no unknown fields, Loaded, FillDefaulted and
// Validated; one run id throughout; Seq increasing. A cut-off last line is
// not an error: it is dropped and reported in warnings (wrapping
// ErrLedgerTruncated). Every error names its line.
func ReadLedger(r io.Reader) (entries []LedgerEntry, warnings []error, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := readLine(br, MaxLedgerLine)
		if err == io.EOF {
			return entries, warnings, nil
		}
		if errors.Is(err, errTornLine) {
			return entries, append(warnings, &LineError{File: "ledger", Line: line, Err: ErrLedgerTruncated}), nil
		}
		if err != nil {
			return nil, nil, &LineError{File: "ledger", Line: line, Err: err}
		}
		if line > MaxLedgerEntries {
			return nil, nil, &LineError{File: "ledger", Line: line, Err: fmt.Errorf("more than %d entries", MaxLedgerEntries)}
		}
		e, err := ParseLedgerLine(b)
		if err != nil {
			return nil, nil, &LineError{File: "ledger", Line: line, Err: err}
		}
		if len(entries) > 0 {
			prev := entries[len(entries)-1]
			if e.RunID != prev.RunID {
				return nil, nil, &LineError{File: "ledger", Line: line, Err: fmt.Errorf("run id %q differs from %q: a ledger holds one run", e.RunID, prev.RunID)}
			}
			if e.Seq <= prev.Seq {
				return nil, nil, &LineError{File: "ledger", Line: line, Err: fmt.Errorf("seq %d does not follow %d", e.Seq, prev.Seq)}
			}
		}
		// A retraction names an earlier entry of the same resource; one
		// before what this read covers (a reader of appended lines only)
		// is the caller's to check.
		if e.Retracts > 0 && (len(entries) == 0 || e.Retracts >= entries[0].Seq) {
			i := slices.IndexFunc(entries, func(o LedgerEntry) bool { return o.Seq == e.Retracts })
			if i < 0 || !entries[i].SameResource(e) || entries[i].Retracts != 0 {
				return nil, nil, &LineError{File: "ledger", Line: line, Err: fmt.Errorf("retracts seq %d, which is not an earlier entry of the same resource (%s)", e.Retracts, e.Name())}
			}
		}
		entries = append(entries, *e)
	}
}

// ParseLedgerLine reads one ledger line (without its newline).
func ParseLedgerLine(b []byte) (*LedgerEntry, error) {
	var e LedgerEntry
	if err := decodeLine(b, "ledger entry", LedgerFormatVersion, &e); err != nil {
		return nil, err
	}
	e.FillDefaults()
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}
