package daemonapi

import (
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{InitCmd{Store: "/w/store", Profile: ProfileDisposable}, "init --store /w/store --profile disposable --json"},
		{ImportCmd{Store: "/w/store", From: "/w/base", Message: "base"}, "import --store /w/store --from /w/base -m base --json"},
		{MountCmd{Store: "/w/store", OverlayDir: "/w/scratch", Workspace: "/w/ws1", Control: "/w/ctl1"},
			"mount --store /w/store --workspace /w/ws1 --control /w/ctl1 --overlay-dir /w/scratch --json"},
		{MountCmd{Store: "s", Workspace: "w", Control: "c", Layer: "abc", NoPassthrough: true, FuseTransport: "dev", ReadyTimeout: 90 * time.Second},
			"mount --store s --workspace w --control c --layer abc --no-passthrough --fuse-transport dev --ready-timeout 1m30s --json"},
		{CommitCmd{Control: "/w/ctl2", Message: "C01"}, "commit --control /w/ctl2 -m C01 --json"},
		{StatsCmd{Control: "/w/ctl2", Timeout: time.Second}, "stats --control /w/ctl2 --timeout 1s --json"},
		{UnmountCmd{Control: "/w/ctl2"}, "unmount --control /w/ctl2 --json"},
		// Required flags are written even when empty: layerfsd then says
		// which one is missing.
		{UnmountCmd{}, "unmount --control  --json"},
	} {
		if got := strings.Join(tc.cmd.Args(), " "); got != tc.want {
			t.Errorf("%T: got %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// TestShell runs the quoted line through sh and gets the same argv back.
func TestShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to check the quoting against:", err)
	}
	c := ImportCmd{Store: "/tmp/a store", From: "it's $HOME `x` \"q\" \\", Message: "", Parent: "*;&|<>"}
	if got, want := Shell(UnmountCmd{Control: "/w/ctl"}), "unmount --control /w/ctl --json"; got != want {
		t.Errorf("plain words are quoted: %q", got)
	}
	out, err := exec.Command(sh, "-c", `f() { for a in "$@"; do printf '[%s]' "$a"; done; }; f `+Shell(c)).CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v: %s", err, out)
	}
	var want strings.Builder
	for _, a := range c.Args() {
		want.WriteString("[" + a + "]")
	}
	if string(out) != want.String() {
		t.Errorf("sh read %s\nwant      %s\nfrom      %s", out, want.String(), Shell(c))
	}
	if Quote("") != "''" {
		t.Errorf("Quote(\"\") = %s", Quote(""))
	}
}

const (
	id   = "3f2a9c1b7d4e3f2a9c1b7d4e3f2a9c1b7d4e3f2a9c1b7d4e3f2a9c1b7d4e0000"
	tree = "aa2a9c1b7d4e3f2a9c1b7d4e3f2a9c1b7d4e3f2a9c1b7d4e3f2a9c1b7d4e0000"
)

func TestDecode(t *testing.T) {
	ready := `{"pid": 42, "store": "/s", "workspace": "/w", "control": "/c", "layer": "` + id + `", "mountNs": 5,
		"features": {"passthrough": true, "maxWrite": 1048576, "transport": "dev", "transportReason": "enable_uring is off"}}`
	r, err := DecodeReady([]byte(ready))
	if err != nil || r.PID != 42 || r.Layer != id || r.MountNs != 5 || !r.Features.Passthrough || r.Features.Transport != TransportDev || r.Features.TransportReason == "" {
		t.Errorf("DecodeReady: %+v, %v", r, err)
	}
	st, err := DecodeStats([]byte(`{"mountpoint": "/w", "store": "/s", "profile": "disposable",
		"requests": {"CREATE": {"count": 3, "totalNs": 9, "medianNs": 2}}, "sqlStatements": 7,
		"storeUsage": {"dbBytes": 1, "blobBytes": 2}, "overlayBytes": 11, "features": {"transport": "uring"},
		"transportStats": {"queues": [{"cpu": 0, "pinned": true, "requests": 3}, {"cpu": 1, "pinned": true, "requests": 0}],
			"ringRequests": 3, "devRequests": 0, "forgets": 1}}`))
	if err != nil || st.Requests["CREATE"].Count != 3 || st.SQLStatements != 7 || st.StoreUsage.BlobBytes != 2 || st.OverlayBytes != 11 ||
		st.Features.Transport != TransportURing || len(st.TransportStats.Queues) != 2 || !st.TransportStats.Queues[0].Pinned || st.TransportStats.RingRequests != 3 {
		t.Errorf("DecodeStats: %+v, %v", st, err)
	}
	cm, err := DecodeCommit([]byte(`{"layer": {"id": "` + id + `", "message": "m", "time": "2026-12-01T00:00:00Z", "tree": "` + tree + `"}, "upToDate": false, "durationNs": 8}`))
	if err != nil || cm.Layer.ID != id || cm.DurationNs != 8 || cm.Layer.Time.Year() != 2026 {
		t.Errorf("DecodeCommit: %+v, %v", cm, err)
	}
	um, err := DecodeUnmount([]byte("{\"lazy\": true, \"durationNs\": 3, \"cleanupNs\": 1}\n"))
	if err != nil || !um.Lazy || um.DurationNs != 3 {
		t.Errorf("DecodeUnmount: %+v, %v", um, err)
	}
	in, err := DecodeInit([]byte(`{"store": "/s", "profile": "fast", "schema": 1}`))
	if err != nil || in.Profile != ProfileFast {
		t.Errorf("DecodeInit: %+v, %v", in, err)
	}
	l, err := DecodeLayer([]byte(`{"id": "` + id + `", "parent": "` + id + `", "message": "", "time": "2026-12-01T00:00:00Z", "tree": "` + tree + `"}`))
	if err != nil || l.Parent != id {
		t.Errorf("DecodeLayer: %+v, %v", l, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		decode func([]byte) error
		in     string
		want   string
	}{
		"empty":         {ready, " \n", "printed nothing"},
		"not JSON":      {ready, "mounted layer abc at /w", "invalid character"},
		"unknown field": {ready, `{"pid": 1, "store": "/s", "workspace": "/w", "control": "/c", "mountMs": 5}`, `unknown field "mountMs"`},
		"trailing":      {ready, `{"pid": 1, "store": "/s", "workspace": "/w", "control": "/c"} {}`, "trailing data"},
		"no pid":        {ready, `{"store": "/s", "workspace": "/w", "control": "/c"}`, "pid 0"},
		"no transport":  {ready, `{"pid": 1, "store": "/s", "workspace": "/w", "control": "/c"}`, `transport ""`},
		"bad transport": {stats, `{"mountpoint": "/w", "store": "/s", "requests": {}, "features": {"transport": "io_uring"}}`, `transport "io_uring"`},
		"wrong type":    {stats, `{"mountpoint": "/w", "store": "/s", "requests": {"CREATE": 3}}`, "cannot unmarshal"},
		"no requests":   {stats, `{"mountpoint": "/w", "store": "/s"}`, "no requests"},
		"short id":      {commit, `{"layer": {"id": "abc", "tree": "` + tree + `"}}`, `layer id "abc"`},
		"bad profile":   {initDoc, `{"store": "/s", "profile": "sometimes"}`, "unknown store profile"},
		"negative":      {unmount, `{"durationNs": -1}`, "negative duration"},
	} {
		err := tc.decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "reading layerfsd's") {
			t.Errorf("%s: got %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func ready(b []byte) error   { _, err := DecodeReady(b); return err }
func stats(b []byte) error   { _, err := DecodeStats(b); return err }
func commit(b []byte) error  { _, err := DecodeCommit(b); return err }
func unmount(b []byte) error { _, err := DecodeUnmount(b); return err }
func initDoc(b []byte) error { _, err := DecodeInit(b); return err }

// TestDecodeError: layerfsd's failure document comes back as an *Error
// with its exit code, whichever answer was expected.
func TestDecodeError(t *testing.T) {
	_, err := DecodeCommit([]byte(`{"error": "daemon at \"/c\": boom", "exitCode": 6}`))
	var e *Error
	if !errors.As(err, &e) || e.ExitCode != ExitNoAnswer || e.Message != `daemon at "/c": boom` {
		t.Fatalf("got %#v", err)
	}
	if !reflect.DeepEqual(err.Error(), `layerfsd failed (exit 6): daemon at "/c": boom`) {
		t.Errorf("Error() = %q", err.Error())
	}
}
