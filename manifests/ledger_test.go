package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

func sampleLedger() []LedgerEntry {
	at := func(s int) time.Time { return time.Date(2026, 11, 29, 9, 0, s, 0, time.UTC) }
	const run = "20261129T090000-3f9a1c"
	const dir = "/var/lib/sealbench/runs/" + run
	const engine = "unix://" + dir + "/local/sock/standin.sock"
	return []LedgerEntry{
		{RunID: run, Seq: 1, Time: at(0), Kind: ResourceDir, Key: dir, Detail: "the run directory"},
		{RunID: run, Seq: 2, Time: at(1), Target: "local", Kind: ResourceDir, Key: dir + "/local"},
		{RunID: run, Seq: 3, Time: at(1), Target: "local", Kind: ResourceStateDir, Key: dir + "/local/state"},
		{RunID: run, Seq: 4, Time: at(1), Target: "local", Kind: ResourceSocket, Key: dir + "/local/sock/standin.sock"},
		{RunID: run, Seq: 5, Time: at(2), Target: "local", Kind: ResourceProcess, Key: dir + "/local/state", Exe: dir + "/local/bin/standin", Detail: "standin serve"},
		{RunID: run, Seq: 6, Time: at(3), Target: "local", Kind: ResourceImage, Key: "sha256:" + strings.Repeat("ab", 32), Engine: engine, Detail: "sealbench/sandbox:build-linux-0123456789ab"},
		{RunID: run, Seq: 7, Time: at(4), Target: "docker", Kind: ResourceContainer, Key: "sealbench-" + run + "-c01", Engine: "unix:///run/docker.sock"},
		{RunID: run, Seq: 8, Time: at(5), Target: "local", Kind: ResourceMount, Key: dir + "/local/ws/c01"},
		{RunID: run, Seq: 9, Time: at(6), Target: "apple", Kind: ResourceImage, Key: "sealbench/sandbox:build-linux-0123456789ab", Exe: "/usr/local/bin/container", Detail: "loaded with container image load"},
		{RunID: run, Seq: 10, Time: at(7), Target: "apple", Kind: ResourceVM, Key: "sealbench-" + run + "-vm", Exe: "/usr/local/bin/container", Labels: map[string]string{RunLabel: run}},
		{RunID: run, Seq: 11, Time: at(8), Target: "apple", Kind: ResourceVolume, Key: "0f3c1a2b", Exe: "/usr/local/bin/container", Detail: "the VM's anonymous volume"},
		{RunID: run, Seq: 12, Time: at(9), Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y", Previous: "N", Detail: "--fuse-uring"},
		{RunID: run, Seq: 13, Time: at(10), Target: "docker", Kind: ResourceImage, Key: "sha256:" + strings.Repeat("cd", 32), Engine: "unix:///run/docker.sock"},
		{RunID: run, Seq: 14, Time: at(11), Target: "docker", Kind: ResourceImage, Key: "sha256:" + strings.Repeat("cd", 32), Engine: "unix:///run/docker.sock", Retracts: 13, Detail: "never made: the Engine refused the load and has no such image"},
	}
}

func TestLedgerGolden(t *testing.T) {
	var b bytes.Buffer
	for _, e := range sampleLedger() {
		e.FillDefaults()
		if err := e.Validate(); err != nil {
			t.Fatalf("entry %d: %v", e.Seq, err)
		}
		line, err := e.MarshalLine()
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
	}
	testenv.Golden(t, "ledger.golden.jsonl", b.Bytes())

	got, warnings, err := ReadLedger(bytes.NewReader(b.Bytes()))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("ReadLedger: %v, warnings %v", err, warnings)
	}
	if len(got) != len(sampleLedger()) || got[6].Labels[RunLabel] != got[6].RunID || got[9].Exe != "/usr/local/bin/container" {
		t.Errorf("read back %d entries; container labels %v", len(got), got[6].Labels)
	}
	// The retracted image and its retraction are not standing.
	if st := Standing(got); len(st) != len(got)-2 || st[len(st)-1].Seq != 12 {
		t.Errorf("Standing: %d entries, the last seq %d; want all but the retracted image and its retraction", len(st), st[len(st)-1].Seq)
	}
}

// TestLedgerRetractionNamesAnEarlierEntryOfTheSameResource: a retraction
// of an entry that is not there, or of another resource, or of itself,
// is refused, naming its line.
func TestLedgerRetractionNamesAnEarlierEntryOfTheSameResource(t *testing.T) {
	base := sampleLedger()[:13]
	for name, r := range map[string]LedgerEntry{
		"no such seq":        {Target: "docker", Kind: ResourceImage, Key: base[12].Key, Engine: base[12].Engine, Retracts: 99},
		"another resource":   {Target: "local", Kind: ResourceDir, Key: base[1].Key, Retracts: 13},
		"itself":             {Target: "docker", Kind: ResourceImage, Key: base[12].Key, Engine: base[12].Engine, Retracts: 14},
		"another host's one": {Target: "docker", Kind: ResourceImage, Key: base[12].Key, Engine: base[12].Engine, Host: "ssh://root@127.0.0.2:22", Retracts: 13},
	} {
		var b bytes.Buffer
		for _, e := range append(base, r) {
			if e.RunID == "" {
				e.RunID, e.Seq, e.Time = base[0].RunID, 14, base[12].Time
			}
			e.FillDefaults()
			line, _ := json.Marshal(e)
			b.Write(append(line, '\n'))
		}
		if _, _, err := ReadLedger(&b); err == nil || !strings.Contains(err.Error(), "line 14") {
			t.Errorf("%s: ReadLedger: %v, want line 14 refused", name, err)
		}
	}
}

func TestLedgerTruncatedLastLineIsAWarning(t *testing.T) {
	var b bytes.Buffer
	for _, e := range sampleLedger()[:3] {
		e.FillDefaults()
		line, _ := e.MarshalLine()
		b.Write(line)
	}
	b.WriteString(`{"formatVersion":1,"runId":"20261129T090000-3f9a1c","seq":4,"ti`)
	got, warnings, err := ReadLedger(&b)
	if err != nil {
		t.Fatalf("a cut-off last line must not be an error: %v", err)
	}
	if len(got) != 3 || len(warnings) != 1 || !errors.Is(warnings[0], ErrLedgerTruncated) || !strings.Contains(warnings[0].Error(), "line 4") {
		t.Errorf("got %d entries, warnings %v", len(got), warnings)
	}
}

func TestLedgerValidateNamesEveryField(t *testing.T) {
	e := LedgerEntry{FormatVersion: 7, RunID: "bad id", Kind: "teapot", Engine: "http://x", Exe: "rel"}
	wantProblems(t, e.Validate(), "formatVersion", "runId", "seq", "time", "kind", "key", "engine", "exe")

	for name, bad := range map[string]LedgerEntry{
		"relative path":       {Kind: ResourceDir, Key: "runs/x"},
		"unclean path":        {Kind: ResourceMount, Key: "/a/../b"},
		"root":                {Kind: ResourceStateDir, Key: "/"},
		"image not a digest":  {Kind: ResourceImage, Key: "busybox", Engine: "unix:///s"},
		"container no label":  {Kind: ResourceContainer, Key: "c", Engine: "unix:///s", Labels: map[string]string{"x": "y"}},
		"container no engine": {Kind: ResourceContainer, Key: "c"},
		"short marker":        {Kind: ResourceProcess, Key: "abc", Exe: "/bin/x"},
		"vm without its tool": {Kind: ResourceVM, Key: "sealbench-r1-vm"},
		"vm relative tool":    {Kind: ResourceVM, Key: "sealbench-r1-vm", Exe: "limactl"},
		"vm in an engine":     {Kind: ResourceVM, Key: "v", Exe: "/usr/bin/msb", Engine: "unix:///s"},
		"engine and tool":     {Kind: ResourceImage, Key: "sha256:" + strings.Repeat("ab", 32), Engine: "unix:///s", Exe: "/usr/bin/container"},
		"tool on a directory": {Kind: ResourceDir, Key: "/var/x", Exe: "/usr/bin/container"},
		"param outside sysfs": {Kind: ResourceKernelParam, Key: "/etc/passwd", Value: "Y", Previous: "N"},
		"param escaping":      {Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/../../../../etc/x", Value: "Y", Previous: "N"},
		"param not a module":  {Kind: ResourceKernelParam, Key: "/sys/kernel/mm/transparent_hugepage/enabled", Value: "Y", Previous: "N"},
		"param no previous":   {Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y"},
		"param no value":      {Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/enable_uring", Previous: "N"},
		"param two words":     {Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y\nN", Previous: "N"},
		"param of a target":   {Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y", Previous: "N", Target: "local"},
		"param with a tool":   {Kind: ResourceKernelParam, Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y", Previous: "N", Exe: "/bin/sh"},
		"value on a dir":      {Kind: ResourceDir, Key: "/var/x", Value: "Y"},
		"previous on a mount": {Kind: ResourceMount, Key: "/var/x", Previous: "N"},
	} {
		bad.RunID, bad.Seq, bad.Time = "r1", 1, time.Unix(1, 0)
		bad.FillDefaults()
		if err := bad.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, bad)
		}
	}
}

// TestLedgerKernelParam: a kernel parameter the run changes is named by
// its sysfs path and carries what the run set and what it was, both
// always (also when equal); each problem names its field.
func TestLedgerKernelParam(t *testing.T) {
	good := LedgerEntry{RunID: "r1", Seq: 2, Time: time.Unix(1, 0), Kind: ResourceKernelParam,
		Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y", Previous: "Y"}
	good.FillDefaults()
	if err := good.Validate(); err != nil {
		t.Fatalf("a no-op change (Y over Y) is recorded all the same: %v", err)
	}
	if good.Kind.IsPath() || good.Kind.OnEngine() {
		t.Error("a kernel parameter is neither a path in the run directory nor on an Engine")
	}
	line, err := good.MarshalLine()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseLedgerLine(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || back.Value != "Y" || back.Previous != "Y" {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	bad := good
	bad.Key, bad.Value, bad.Previous, bad.Target = "/proc/sys/kernel/x", "", "a b", "local"
	wantProblems(t, bad.Validate(), "key", "value", "previous", "target")
}

func TestLedgerReadRejects(t *testing.T) {
	line := func(e LedgerEntry) string {
		e.FillDefaults()
		b, _ := e.MarshalLine()
		return string(b)
	}
	s := sampleLedger()
	for name, in := range map[string]string{
		"unknown field":  `{"formatVersion":1,"runId":"r","seq":1,"time":"2026-01-01T00:00:00Z","kind":"dir","key":"/x","extra":1}` + "\n",
		"other version":  `{"formatVersion":2}` + "\n",
		"blank line":     line(s[0]) + "\n",
		"seq goes back":  line(s[1]) + line(s[0]),
		"two runs":       line(s[0]) + strings.Replace(line(s[1]), s[1].RunID, "other", 1),
		"not json":       "hello\n",
		"invalid middle": line(s[0]) + `{"formatVersion":1,"runId":"r","seq":2}` + "\n" + line(s[2]),
	} {
		if _, _, err := ReadLedger(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "ledger line") {
			t.Errorf("%s: error does not name the line: %v", name, err)
		}
	}
}

// TestLedgerHost: an entry on a remote host names it in the canonical
// form, which survives a round trip; anything else is refused, and a
// kernel parameter never has one.
func TestLedgerHost(t *testing.T) {
	e := LedgerEntry{RunID: "r1", Seq: 2, Time: time.Unix(1, 0), Target: "docker-gpu1", Host: "ssh://root@gpu1:22",
		Kind: ResourceDir, Key: "/var/lib/sealbench/runs/r1"}
	e.FillDefaults()
	for _, h := range []string{"ssh://root@gpu1:22", "ssh://bench@10.0.0.7:2222", "ssh://ci_runner.2@build-box.example.com:22", "ssh://root@[fd00::7]:22"} {
		e.Host = h
		if err := e.Validate(); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	line, err := e.MarshalLine()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ParseLedgerLine(bytes.TrimSuffix(line, []byte("\n"))); err != nil || back.Host != e.Host {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, h := range []string{"gpu1", "ssh://gpu1:22", "ssh://root@gpu1", "ssh://root@GPU1:22", "ssh://root@gpu1:0", "ssh://root@gpu1:022",
		"ssh://root@fd00::7:22", "ssh://root@[10.0.0.7]:22", "ssh://-o@gpu1:22", "http://root@gpu1:22", "ssh://root@gpu1:22/x"} {
		e.Host = h
		wantProblems(t, e.Validate(), "host")
	}
	k := LedgerEntry{RunID: "r1", Seq: 2, Time: time.Unix(1, 0), Kind: ResourceKernelParam, Host: "ssh://root@gpu1:22",
		Key: "/sys/module/fuse/parameters/enable_uring", Value: "Y", Previous: "N"}
	k.FillDefaults()
	wantProblems(t, k.Validate(), "host")
}
