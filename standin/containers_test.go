//go:build linux

package standin

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/standin/inventory"
)

const testImage = "sealbench/busybox:test"

// withBusybox loads a busybox image, plus the probe when asked.
func withBusybox(t testing.TB, s *testServer, probe bool) {
	t.Helper()
	layers := [][]byte{layerTar(t, busyboxEntries(t))}
	if probe {
		pb := string(buildProbe(t))
		layers = append(layers, layerTar(t, []entry{
			{name: "bin/probe", body: pb, mode: 0o755},
			// What a body could try to gain root with; and a bundle, as
			// the Sandbox image holds one, for bodies to try to change.
			{name: "bin/probe-suid", body: pb, mode: 0o4755},
			{name: "opt/", typ: tar.TypeDir},
			{name: "opt/sealbench/", typ: tar.TypeDir},
			{name: "opt/sealbench/SHA256SUMS", body: "0000  bin/tool\n"},
			{name: "opt/sealbench/bin/", typ: tar.TypeDir},
			{name: "opt/sealbench/bin/tool", body: "#!/bin/sh\n", mode: 0o755},
		}))
	}
	s.load(t, dockerSaveTar(t, testImage, buildImage(t, layers...)))
}

// buildProbe builds testdata/probe, statically.
func buildProbe(t testing.TB) []byte {
	t.Helper()
	testenv.Short(t, "builds the probe with the go command")
	goCmd := testenv.NeedCommand(t, "go")
	out := filepath.Join(t.TempDir(), "probe")
	cmd := exec.Command(goCmd, "build", "-o", out, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *testServer) create(t testing.TB, cfg *container.Config, host *container.HostConfig, name string) string {
	t.Helper()
	if cfg.Image == "" {
		cfg.Image = testImage
	}
	if host == nil {
		host = &container.HostConfig{}
	}
	if host.NetworkMode == "" {
		host.NetworkMode = "none"
	}
	resp, err := s.cli.ContainerCreate(context.Background(), cfg, host, nil, nil, name)
	if err != nil {
		t.Fatalf("creating container: %v", err)
	}
	return resp.ID
}

func (s *testServer) run(t testing.TB, cfg *container.Config, host *container.HostConfig) string {
	t.Helper()
	id := s.create(t, cfg, host, "")
	if err := s.cli.ContainerStart(context.Background(), id, container.StartOptions{}); err != nil {
		t.Fatalf("starting container: %v", err)
	}
	return id
}

type execResult struct {
	stdout, stderr string
	code           int
}

// exec runs a command through the official client: create, start with
// the multiplexed stream, inspect.
func (s *testServer) exec(t testing.TB, id string, opts container.ExecOptions, stdin string) execResult {
	t.Helper()
	ctx := context.Background()
	opts.AttachStdout, opts.AttachStderr = true, true
	opts.AttachStdin = stdin != ""
	created, err := s.cli.ContainerExecCreate(ctx, id, opts)
	if err != nil {
		t.Fatalf("exec create %v: %v", opts.Cmd, err)
	}
	hr, err := s.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec start %v: %v", opts.Cmd, err)
	}
	defer hr.Close()
	if stdin != "" {
		go func() {
			hr.Conn.Write([]byte(stdin))
			hr.CloseWrite()
		}()
	}
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, hr.Reader); err != nil {
		t.Fatalf("exec stream %v: %v", opts.Cmd, err)
	}
	insp, err := s.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if insp.Running {
		t.Fatalf("exec %v still running after its stream ended", opts.Cmd)
	}
	return execResult{out.String(), errb.String(), insp.ExitCode}
}

func TestContainerLifecycle(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	ctx := context.Background()
	bind := t.TempDir()
	os.Chmod(bind, 0o755)
	os.WriteFile(filepath.Join(bind, "from-host"), []byte("host data"), 0o644)
	roBind := t.TempDir()
	os.Chmod(roBind, 0o755)

	id := s.run(t, &container.Config{
		Cmd: []string{"sleep", "1000"}, Env: []string{"FOO=bar"}, WorkingDir: "/work", Hostname: "sb1",
		Labels: map[string]string{"sealbench.run": "r1"},
	}, &container.HostConfig{
		ReadonlyRootfs: true,
		Binds:          []string{bind + ":/data", roBind + ":/ro:ro"},
		Tmpfs:          map[string]string{"/scratch": "size=1m"},
		Mounts:         []mount.Mount{{Type: mount.TypeTmpfs, Target: "/scratch2"}},
	})

	insp, err := s.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !insp.State.Running || insp.Config.Labels["sealbench.run"] != "r1" || insp.Config.Labels["from.image"] != "1" {
		t.Errorf("inspect: state %+v labels %v", insp.State, insp.Config.Labels)
	}

	for _, tc := range []struct {
		name  string
		opts  container.ExecOptions
		stdin string
		want  execResult
	}{
		{"streams and exit code", container.ExecOptions{Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}}, "", execResult{"out\n", "err\n", 7}},
		{"container env and cwd", container.ExecOptions{Cmd: []string{"sh", "-c", "echo $FOO $IMAGE_ENV; pwd; id -u; hostname"}}, "", execResult{"bar yes\n/work\n0\nsb1\n", "", 0}},
		{"exec env, cwd, user", container.ExecOptions{Cmd: []string{"sh", "-c", "echo $X; pwd; id -u"}, Env: []string{"X=1"}, WorkingDir: "/tmp", User: "nobody"}, "", execResult{"1\n/tmp\n65534\n", "", 0}},
		{"stdin", container.ExecOptions{Cmd: []string{"cat"}}, "hello stdin", execResult{"hello stdin", "", 0}},
		{"bind readable", container.ExecOptions{Cmd: []string{"cat", "/data/from-host"}}, "", execResult{"host data", "", 0}},
		{"bind writable", container.ExecOptions{Cmd: []string{"sh", "-c", "echo hi > /data/from-sandbox"}}, "", execResult{"", "", 0}},
		{"read-only bind", container.ExecOptions{Cmd: []string{"sh", "-c", "touch /ro/x 2>/dev/null || echo refused"}}, "", execResult{"refused\n", "", 0}},
		{"tmpfs writable", container.ExecOptions{Cmd: []string{"sh", "-c", "echo x > /scratch/a && echo x > /scratch2/b && cat /scratch/a"}}, "", execResult{"x\n", "", 0}},
		{"read-only root", container.ExecOptions{Cmd: []string{"sh", "-c", "touch /x 2>/dev/null || echo refused"}}, "", execResult{"refused\n", "", 0}},
		{"missing command", container.ExecOptions{Cmd: []string{"no-such-command"}}, "", execResult{"", "", 127}},
		{"etc files", container.ExecOptions{Cmd: []string{"sh", "-c", "grep -c localhost /etc/hosts; grep sb1 /etc/hosts | wc -l; cat /etc/hostname; grep -c nameserver /etc/resolv.conf"}}, "", execResult{"2\n1\nsb1\n0\n", "", 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.exec(t, id, tc.opts, tc.stdin)
			if tc.want.code == 127 {
				got.stderr = "" // the message is free-form
			}
			if got != tc.want {
				t.Errorf("exec %v: got %+v, want %+v", tc.opts.Cmd, got, tc.want)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(bind, "from-sandbox")); err != nil || string(b) != "hi\n" {
		t.Errorf("write through the bind: %q, %v", b, err)
	}

	// A second container, to see label filters and logs.
	id2 := s.run(t, &container.Config{Cmd: []string{"sh", "-c", "echo hello; echo oops >&2; exit 3"}, Labels: map[string]string{"sealbench.run": "r2"}}, nil)
	waitC, errC := s.cli.ContainerWait(ctx, id2, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 3 {
			t.Errorf("wait: status %d, want 3", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	rc, err := s.cli.ContainerLogs(ctx, id2, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	var lo, le bytes.Buffer
	stdcopy.StdCopy(&lo, &le, rc)
	rc.Close()
	if lo.String() != "hello\n" || le.String() != "oops\n" {
		t.Errorf("logs: stdout %q stderr %q", lo.String(), le.String())
	}
	// Following a running container's logs ends when it exits, with all of it.
	id3 := s.create(t, &container.Config{Cmd: []string{"sh", "-c", "echo one; sleep 0.1; echo two >&2; echo three"}}, nil, "")
	if err := s.cli.ContainerStart(ctx, id3, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err = s.cli.ContainerLogs(ctx, id3, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	lo.Reset()
	le.Reset()
	stdcopy.StdCopy(&lo, &le, rc)
	rc.Close()
	if lo.String() != "one\nthree\n" || le.String() != "two\n" {
		t.Errorf("logs -f: stdout %q stderr %q", lo.String(), le.String())
	}
	if err := s.cli.ContainerRemove(ctx, id3, container.RemoveOptions{}); err != nil {
		t.Errorf("removing an exited container: %v", err)
	}
	for _, tc := range []struct {
		all    bool
		filter string
		want   []string
	}{
		{true, "sealbench.run=r1", []string{id}},
		{true, "sealbench.run=r2", []string{id2}},
		{true, "sealbench.run", []string{id2, id}},
		{false, "sealbench.run", []string{id}},
		{true, "sealbench.run=r3", nil},
	} {
		list, err := s.cli.ContainerList(ctx, container.ListOptions{All: tc.all, Filters: filters.NewArgs(filters.Arg("label", tc.filter))})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range list {
			got = append(got, c.ID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("list all=%v label=%s: %v, want %v", tc.all, tc.filter, got, tc.want)
		}
	}

	// Stop sends SIGTERM to the main process (busybox sleep dies of it).
	if err := s.cli.ContainerStop(ctx, id, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	insp, _ = s.cli.ContainerInspect(ctx, id)
	if insp.State.Running || insp.State.ExitCode != 143 {
		t.Errorf("after stop: %+v, want exited 143", insp.State)
	}
	if _, err := s.cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"true"}}); !cerrdefs.IsConflict(err) {
		t.Errorf("exec in a stopped container: %v, want a conflict", err)
	}
	// Restart, kill, and remove with force.
	if err := s.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.cli.ContainerRemove(ctx, id, container.RemoveOptions{}); !cerrdefs.IsConflict(err) {
		t.Errorf("removing a running container without force: %v, want a conflict", err)
	}
	if err := s.cli.ContainerKill(ctx, id, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitC, errC = s.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 137 {
			t.Errorf("after kill: status %d, want 137", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	if err := s.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{id, id2} {
		if err := s.cli.ContainerRemove(ctx, c, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.cli.ContainerInspect(ctx, id); !cerrdefs.IsNotFound(err) {
		t.Errorf("inspect after remove: %v, want not found", err)
	}
	inv, err := inventory.Read(s.state)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Containers) != 0 || len(inv.Processes) != 0 || len(inv.Mounts) != 0 {
		t.Errorf("after removing every container: %+v", inv)
	}
}

func TestContainerCreateRefusals(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		cfg  container.Config
		host container.HostConfig
	}{
		"bridge network": {container.Config{Image: testImage}, container.HostConfig{NetworkMode: "bridge"}},
		"host network":   {container.Config{Image: testImage}, container.HostConfig{NetworkMode: "host"}},
		"host pid":       {container.Config{Image: testImage}, container.HostConfig{NetworkMode: "none", PidMode: "host"}},
		"volume":         {container.Config{Image: testImage}, container.HostConfig{NetworkMode: "none", Binds: []string{"vol:/data"}}},
		"tty":            {container.Config{Image: testImage, Tty: true}, container.HostConfig{NetworkMode: "none"}},
		"bad cap":        {container.Config{Image: testImage}, container.HostConfig{NetworkMode: "none", CapAdd: []string{"CAP_NOPE"}}},
		"memory limit":   {container.Config{Image: testImage}, container.HostConfig{NetworkMode: "none", Resources: container.Resources{Memory: 1 << 30}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.cli.ContainerCreate(ctx, &tc.cfg, &tc.host, nil, nil, "")
			if !cerrdefs.IsInvalidArgument(err) {
				t.Errorf("create: %v, want invalid argument", err)
			}
		})
	}
	if _, err := s.cli.ContainerCreate(ctx, &container.Config{Image: "nope:1"}, &container.HostConfig{NetworkMode: "none"}, nil, nil, ""); !cerrdefs.IsNotFound(err) {
		t.Errorf("create from a missing image: %v, want not found", err)
	}
	s.create(t, &container.Config{Cmd: []string{"true"}}, nil, "same")
	if _, err := s.cli.ContainerCreate(ctx, &container.Config{Image: testImage, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "same"); !cerrdefs.IsConflict(err) {
		t.Errorf("create with a taken name: %v, want conflict", err)
	}
}

// TestCreateBodyIsBounded sends the stand-in a 300 MB container create,
// chunked and made as it is read, as a client that does not stop could:
// it is refused with 413 in the Engine API's error shape, without the
// stand-in holding it (what this process allocates meanwhile stays far
// below its size), and a normal create still works after it.
func TestCreateBodyIsBounded(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	const size = 300 << 20
	const head, tail = `{"Image":"` + testImage + `","HostConfig":{"NetworkMode":"none"},"Labels":{"a":"`, `"}}`
	body := io.MultiReader(strings.NewReader(head), io.LimitReader(repeatByte('a'), size-int64(len(head)+len(tail))), strings.NewReader(tail))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, b := s.raw(t, http.MethodPost, "/v1.51/containers/create?name=big", body)
	runtime.ReadMemStats(&after)
	var e struct{ Message string }
	if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Message, "request body too large") {
		t.Errorf("a %d MiB create: %d %s, want 413 in the error shape", size>>20, resp.StatusCode, b)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("%d MiB allocated while refusing a %d MiB create", grew>>20, size>>20)
	}
	if _, err := s.cli.ContainerInspect(context.Background(), "big"); !cerrdefs.IsNotFound(err) {
		t.Errorf("the refused create made a container: %v", err)
	}
	s.create(t, &container.Config{Cmd: []string{"true"}}, nil, "small")
}

// repeatByte reads as an endless run of its byte.
type repeatByte byte

func (b repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// probe runs testdata/probe in the container and returns its report.
func (s *testServer) probe(t *testing.T, id string, opts container.ExecOptions) map[string]string {
	t.Helper()
	opts.Cmd = []string{"/bin/probe"}
	r := s.exec(t, id, opts, "")
	if r.code != 0 {
		t.Fatalf("probe: exit %d, stderr %s", r.code, r.stderr)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("probe output %q: %v", r.stdout, err)
	}
	return m
}

func TestIsolationUnprivilegedExec(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, true)
	testenv.NeedFUSE(t)
	host := &container.HostConfig{ReadonlyRootfs: true, CapAdd: []string{"SYS_ADMIN"}}
	host.Devices = []container.DeviceMapping{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}}
	id := s.run(t, &container.Config{Cmd: []string{"sleep", "1000"}, WorkingDir: "/work", Hostname: "iso"}, host)

	got := s.probe(t, id, container.ExecOptions{})
	for k, want := range map[string]string{
		"NoNewPrivs": "1", "Seccomp": "2",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"fds": "0,1,2", "chdir_fd": "none", "cwd": "/work", "hostname": "iso", "loopback": "ok",
		"interfaces": "lo",
	} {
		if got[k] != want {
			t.Errorf("unprivileged exec: %s = %q, want %q (fds: %s)", k, got[k], want, got["fd_targets"])
		}
	}
	for _, k := range []string{"mount", "unshare_user", "unshare_mount", "unshare_net", "raw_socket", "packet_socket", "dial_external", "udp_external", "write_root", "write_proc_sys"} {
		if got[k] == "ok" {
			t.Errorf("unprivileged exec: %s succeeded", k)
		}
	}
	// Only the Sandbox's own processes: its init, the main process and the probe.
	procs := strings.Split(got["processes"], ";")
	if len(procs) != 3 || !strings.HasPrefix(procs[0], "1=standin-sandbox-init") {
		t.Errorf("unprivileged exec sees processes %q, want the init, sleep and itself", procs)
	}

	// A cell body: uid 65534, not privileged, as the runner runs it
	// (runner.BodyUser). Besides all of the above, it cannot change the
	// bundle in the image, and a setuid-root binary does not make it root.
	// In this container (read-only root) and in one made as every
	// Sandbox is (engine.SandboxConfig: a writable root).
	sandboxLike := &container.HostConfig{CapAdd: []string{"SYS_ADMIN"}}
	sandboxLike.Devices = host.Devices
	writable := s.run(t, &container.Config{Cmd: []string{"sleep", "1000"}, WorkingDir: "/work"}, sandboxLike)
	for _, id := range []string{id, writable} {
		bodyConfined(t, s, id)
	}

	// A privileged exec keeps what the container was granted: the LayerFS
	// daemon mounts FUSE with it. This is also the check that the
	// refusals above are the Sandbox's doing, not the probe's.
	priv := s.probe(t, id, container.ExecOptions{Privileged: true})
	if priv["mount"] != "ok" || priv["NoNewPrivs"] != "0" || priv["CapEff"] == "0000000000000000" {
		t.Errorf("privileged exec: mount %q NoNewPrivs %q CapEff %q", priv["mount"], priv["NoNewPrivs"], priv["CapEff"])
	}
	if priv["dev_fuse"] != "ok" || priv["fuse_mount"] != "ok" {
		t.Errorf("privileged exec: /dev/fuse %s, FUSE mount %s", priv["dev_fuse"], priv["fuse_mount"])
	}
	if got["fuse_mount"] == "ok" {
		t.Error("unprivileged exec mounted FUSE")
	}
	if priv["fds"] != "0,1,2" || priv["chdir_fd"] != "none" {
		t.Errorf("privileged exec: fds %q, chdir through fd %q", priv["fds"], priv["chdir_fd"])
	}
	if priv["dial_external"] == "ok" || priv["write_proc_sys"] == "ok" {
		t.Errorf("privileged exec reached outside: dial %q, /proc/sys %q", priv["dial_external"], priv["write_proc_sys"])
	}
}

// bodyConfined probes an exec as a cell body runs (runner.BodyUser: uid
// 65534, not privileged). Besides what any unprivileged exec is denied, it
// cannot change the bundle in the image, and a setuid-root binary does not
// make it root.
func bodyConfined(t *testing.T, s *testServer, id string) {
	t.Helper()
	body := s.probe(t, id, container.ExecOptions{User: "65534:65534"})
	for k, want := range map[string]string{
		"uid": "65534:65534", "NoNewPrivs": "1", "setuid_euid": "65534",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"fds": "0,1,2", "chdir_fd": "none", "interfaces": "lo",
	} {
		if body[k] != want {
			t.Errorf("exec as uid 65534: %s = %q, want %q", k, body[k], want)
		}
	}
	for _, k := range []string{"mount", "unshare_user", "unshare_mount", "unshare_net", "raw_socket", "packet_socket", "dial_external", "udp_external", "write_root", "write_proc_sys", "fuse_mount"} {
		if body[k] == "ok" {
			t.Errorf("exec as uid 65534: %s succeeded", k)
		}
	}
	if strings.HasPrefix(body["write_bundle"], "ok") || !strings.Contains(body["write_bundle"], "create: ") {
		t.Errorf("exec as uid 65534 changed the bundle in the image: %s", body["write_bundle"])
	}
	if procs := strings.Split(body["processes"], ";"); len(procs) != 3 {
		t.Errorf("exec as uid 65534 sees processes %q, want the init, sleep and itself", procs)
	}
	// The control: without no_new_privs (a privileged exec as the same
	// user) the setuid bit works, so the refusal above is the Sandbox's.
	if ctl := s.probe(t, id, container.ExecOptions{User: "65534:65534", Privileged: true}); ctl["setuid_euid"] != "0" {
		t.Errorf("privileged exec as uid 65534: the setuid-root probe ran as %q, want 0: the setuid check above proves nothing", ctl["setuid_euid"])
	}
}

// TestContainerPrivileges: what the main process and privileged execs get
// follows Privileged, CapAdd and CapDrop; unprivileged execs get nothing
// whatever the container was granted.
func TestContainerPrivileges(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, true)
	const (
		none = "0000000000000000"
		// CAP_CHOWN and CAP_KILL (bits 0 and 5).
		chownKill = "0000000000000021"
	)
	allCaps := func() string {
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatal("no CapBnd in /proc/self/status")
		return ""
	}()
	for _, tc := range []struct {
		name      string
		host      container.HostConfig
		user      string
		privEff   string // CapEff of a privileged exec
		privMount bool   // a privileged exec can mount
	}{
		{"privileged", container.HostConfig{Privileged: true}, "", allCaps, true},
		{"drop all add two", container.HostConfig{CapDrop: []string{"ALL"}, CapAdd: []string{"CHOWN", "CAP_KILL"}}, "", chownKill, false},
		{"drop all", container.HostConfig{CapDrop: []string{"ALL"}}, "", none, false},
		{"non-root user", container.HostConfig{Privileged: true}, "nobody", none, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := s.run(t, &container.Config{Cmd: []string{"sleep", "1000"}, User: tc.user}, &tc.host)
			defer s.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
			priv := s.probe(t, id, container.ExecOptions{Privileged: true})
			if priv["CapEff"] != tc.privEff || priv["CapBnd"] != tc.privEff && tc.user == "" {
				t.Errorf("privileged exec: CapEff %s CapBnd %s, want %s", priv["CapEff"], priv["CapBnd"], tc.privEff)
			}
			if (priv["mount"] == "ok") != tc.privMount {
				t.Errorf("privileged exec: mount %q, want success %v", priv["mount"], tc.privMount)
			}
			unpriv := s.probe(t, id, container.ExecOptions{})
			if unpriv["CapEff"] != none || unpriv["CapBnd"] != none || unpriv["NoNewPrivs"] != "1" || unpriv["mount"] == "ok" {
				t.Errorf("unprivileged exec: CapEff %s CapBnd %s NoNewPrivs %s mount %s", unpriv["CapEff"], unpriv["CapBnd"], unpriv["NoNewPrivs"], unpriv["mount"])
			}
			// The main process runs as the container's user.
			r := s.exec(t, id, container.ExecOptions{Cmd: []string{"sh", "-c", "ps -o user,args | grep 'sleep 1000' | grep -v grep"}}, "")
			wantUser := "root"
			if tc.user != "" {
				wantUser = tc.user
			}
			if !strings.HasPrefix(strings.TrimSpace(r.stdout), wantUser) {
				t.Errorf("main process: %q, want user %s", r.stdout, wantUser)
			}
		})
	}
}

// TestConcurrentExecs: execs at once, each with its own streams and exit code.
func TestConcurrentExecs(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	id := s.run(t, &container.Config{Cmd: []string{"sleep", "1000"}}, nil)
	const n = 24
	type res struct {
		i int
		r execResult
	}
	results := make(chan res, n)
	for i := range n {
		go func() {
			results <- res{i, s.exec(t, id, container.ExecOptions{Cmd: []string{"sh", "-c", fmt.Sprintf("echo out%d; echo err%d >&2; exit %d", i, i, i)}, Privileged: i%3 == 0}, "")}
		}()
	}
	for range n {
		r := <-results
		want := execResult{fmt.Sprintf("out%d\n", r.i), fmt.Sprintf("err%d\n", r.i), r.i}
		if r.r != want {
			t.Errorf("exec %d: %+v, want %+v", r.i, r.r, want)
		}
	}
}

// TestStopKillsWhatIgnoresTheSignal: stop's timeout ends in SIGKILL.
func TestStopKillsWhatIgnoresTheSignal(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	id := s.run(t, &container.Config{Cmd: []string{"sh", "-c", "trap '' TERM; touch /tmp/trapped; while :; do sleep 1; done"}}, nil)
	// Stop only once the trap is set, or SIGTERM would simply work.
	deadline := time.Now().Add(time.Minute)
	for s.exec(t, id, container.ExecOptions{Cmd: []string{"test", "-e", "/tmp/trapped"}}, "").code != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the main process never set its trap")
		}
		time.Sleep(5 * time.Millisecond)
	}
	timeout := 1
	if err := s.cli.ContainerStop(context.Background(), id, container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	insp, err := s.cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if insp.State.Running || insp.State.ExitCode != 137 {
		t.Errorf("after stop: %+v, want exited 137", insp.State)
	}
}

// TestForcedImageRemoval: a running Sandbox keeps its layers when its
// image is force-removed; removing the container then frees them.
func TestForcedImageRemoval(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	ctx := context.Background()
	id := s.run(t, &container.Config{Cmd: []string{"sleep", "1000"}}, nil)
	if _, err := s.cli.ImageRemove(ctx, testImage, image.RemoveOptions{}); !cerrdefs.IsConflict(err) {
		t.Errorf("removing an image in use without force: %v, want a conflict", err)
	}
	if _, err := s.cli.ImageRemove(ctx, testImage, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if r := s.exec(t, id, container.ExecOptions{Cmd: []string{"echo", "still here"}}, ""); r.stdout != "still here\n" {
		t.Errorf("exec after the image went: %+v", r)
	}
	if layers, _ := filepath.Glob(filepath.Join(s.state, "layers", "*")); len(layers) != 1 {
		t.Errorf("layers while the container runs: %v", layers)
	}
	if err := s.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if layers, _ := filepath.Glob(filepath.Join(s.state, "layers", "*")); len(layers) != 0 {
		t.Errorf("layers after the container went: %v", layers)
	}
}

// TestDetachedExec: a detached exec keeps running after start returns,
// and ends with its container.
func TestDetachedExec(t *testing.T) {
	testenv.NeedRoot(t)
	s := newTestServer(t)
	withBusybox(t, s, false)
	ctx := context.Background()
	id := s.run(t, &container.Config{Cmd: []string{"sleep", "1000"}}, nil)
	// It writes to stdout: with nobody reading, it must not die of SIGPIPE.
	created, err := s.cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"sh", "-c", "while :; do echo tick; sleep 0.01; done"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cli.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	insp, err := s.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !insp.Running || insp.Pid <= 0 {
		t.Errorf("detached exec right after start: %+v", insp)
	}
	// (A fork of the loop's shell may show too, before it execs sleep.)
	if r := s.exec(t, id, container.ExecOptions{Cmd: []string{"sh", "-c", "sleep 0.2; ps -o args | grep -q '[w]hile' && echo alive"}}, ""); r.stdout != "alive\n" {
		t.Errorf("the detached loop after 0.2s: %+v", r)
	}
	if err := s.cli.ContainerKill(ctx, id, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitC, errC := s.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatal(err)
	}
	// Its record ends too, once the Sandbox is gone. (The deadline only
	// keeps a broken build from hanging the run; it asserts no timing.)
	deadline := time.Now().Add(time.Minute)
	for {
		insp, err = s.cli.ContainerExecInspect(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !insp.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the detached exec still runs a minute after its container was killed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if insp.ExitCode != 137 {
		t.Errorf("detached exec after its container was killed: exit %d, want 137", insp.ExitCode)
	}
}
