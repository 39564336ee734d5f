package kubeengine

import (
	"bytes"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

func TestArgsRoundTrip(t *testing.T) {
	c := Config{Socket: "/run/x/engine.sock", Kubeconfig: "/k", Context: "ctx", Namespace: "ns", Node: "n1",
		RuntimeClass: "gvisor", FUSEResource: "sealbench.dev/fuse", Containerd: "/run/containerd/containerd.sock", Ctr: "/usr/bin/ctr", RunID: "r1", SeccompDir: "/var/lib/kubelet/seccomp", StartTimeout: 90 * time.Second, AgentSandbox: true, WarmPool: 3}
	got, err := ParseArgs(c.Args())
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("ParseArgs(Args()) = %+v, %v; want %+v", got, err, c)
	}
}

func TestParseArgsNamesWhatIsMissing(t *testing.T) {
	_, err := ParseArgs([]string{"--socket", "rel.sock", "--containerd", "x"})
	for _, want := range []string{"--namespace", "--node", "--fuse-resource", "--run", `--socket "rel.sock"`, `--containerd "x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseArgs: %v, want it to name %s", err, want)
		}
	}
	if _, err := ParseArgs([]string{"extra"}); err == nil {
		t.Error("ParseArgs took an argument")
	}
	base := []string{"--socket", "/s", "--namespace", "ns", "--node", "n", "--fuse-resource", "r", "--run", "id"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--warm-pool", "2"}, "--warm-pool goes with --agent-sandbox"},
		{[]string{"--agent-sandbox", "--warm-pool", "9"}, "--warm-pool 9 is not from 0 to 8"},
		{[]string{"--agent-sandbox", "--warm-pool", "-1"}, "--warm-pool -1 is not from 0 to 8"},
	} {
		if _, err := ParseArgs(append(base[:len(base):len(base)], c.args...)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseArgs(%q): %v, want %q", c.args, err, c.want)
		}
	}
	if c, err := ParseArgs(append(base, "--agent-sandbox", "--warm-pool", "8")); err != nil || c.WarmPool != 8 {
		t.Errorf("ParseArgs(--warm-pool 8) = %d, %v", c.WarmPool, err)
	}
}

func TestPodName(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"sealbench-0a1b-probe", "Sealbench-0a1b-probe", "a_b", "a.b", "/a-b", strings.Repeat("x", 80), strings.Repeat("x", 81), "--"} {
		p := PodName(n)
		if len(p) > 63 || p == "" || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || p[0] == '-' || p[len(p)-1] == '-' {
			t.Errorf("PodName(%q) = %q: not a DNS label", n, p)
		}
		if o, ok := seen[p]; ok && strings.TrimPrefix(o, "/") != strings.TrimPrefix(n, "/") {
			t.Errorf("PodName(%q) = PodName(%q) = %q", n, o, p)
		}
		seen[p] = n
	}
	if p := PodName("sealbench-0a1b-probe"); p != "sealbench-0a1b-probe" {
		t.Errorf("a name that is a pod name already became %q", p)
	}
}

func TestPidWriter(t *testing.T) {
	for _, c := range []struct {
		chunks  []string
		pid     int
		through string
	}{
		{[]string{"12", "3\nhel", "lo"}, 123, "hello"},
		{[]string{"42\n"}, 42, ""},
		{[]string{"kube-engine: exec failed\n"}, 0, "kube-engine: exec failed\n"},
		{[]string{"no newline"}, 0, "no newline"},
	} {
		var b bytes.Buffer
		w := &pidWriter{out: &b}
		for _, ch := range c.chunks {
			w.Write([]byte(ch))
		}
		w.flush()
		if w.pid != c.pid || b.String() != c.through {
			t.Errorf("%q: pid %d, passed %q; want %d, %q", c.chunks, w.pid, b.String(), c.pid, c.through)
		}
	}
}

// The wrapper runs here under the host's sh as it runs in a pod: its
// pid line, working directory, environment, and a missing directory.
func TestWrapper(t *testing.T) {
	run := func(opts container.ExecOptions) (out string, code int) {
		e := &execRec{c: &containerRec{containerRecord: containerRecord{Config: &container.Config{}}}, opts: opts}
		cmd := exec.Command("/bin/sh", append([]string{"-c", e.wrapper(), "kube-engine-exec"}, opts.Cmd...)...)
		b, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), code
	}
	out, code := run(container.ExecOptions{Cmd: []string{"sh", "-c", `echo $$; pwd; printf '%s|' "$A" "$B" "$@"`, "x", "a b", "c'd"},
		WorkingDir: "/tmp", Env: []string{"A=it's", "B=$HOME"}})
	first, rest, _ := strings.Cut(out, "\n")
	pid, _ := strconv.Atoi(first)
	if code != 0 || pid == 0 || rest != first+"\n/tmp\nit's|$HOME|a b|c'd|" {
		t.Errorf("exit %d, output %q: want the command's pid first, then /tmp and the values as given", code, out)
	}
	out, code = run(container.ExecOptions{Cmd: []string{"echo", "ran"}, WorkingDir: "/no/such/dir"})
	if code != 126 || strings.Contains(out, "ran") || !strings.Contains(out, "/no/such/dir") {
		t.Errorf("in a missing directory: exit %d, %q", code, out)
	}
}
