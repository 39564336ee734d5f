//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/standin/inventory"
)

// buildStandin builds this command as it ships: static, no cgo.
func buildStandin(t *testing.T) string {
	t.Helper()
	testenv.Short(t, "builds the standin binary")
	goCmd := testenv.NeedCommand(t, "go")
	out := filepath.Join(t.TempDir(), "standin")
	cmd := exec.Command(goCmd, "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building standin: %v\n%s", err, b)
	}
	return out
}

// busyboxSaveTar is a busybox-static root filesystem as `docker save` writes it.
func busyboxSaveTar(t *testing.T, tag string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := testimage.Busybox(testenv.NeedCommand(t, "busybox"), tag, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type daemon struct {
	cmd    *exec.Cmd
	socket string
	state  string
	stderr *bytes.Buffer
	done   chan error
}

// startStandin runs `standin serve` on state (a new directory when "")
// and waits until it is ready.
func startStandin(t *testing.T, bin, state string) *daemon {
	t.Helper()
	base := t.TempDir()
	if state == "" {
		state = filepath.Join(base, "state")
	}
	d := &daemon{socket: filepath.Join(base, "run", "standin.sock"), state: state, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(bin, "serve", "--socket", d.socket, "--state", d.state, "--json")
	d.cmd.Stderr = d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		d.cmd.Process.Kill()
		d.cmd.Wait()
		t.Fatalf("standin serve never said it was ready: %v\n%s", err, d.stderr)
	}
	var ready struct {
		Ready  bool
		Socket string
		Procs  int
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil || !ready.Ready || ready.Socket != d.socket {
		t.Fatalf("ready line %q: %v", line, err)
	}
	// One CPU at a time, unless the environment says how many.
	wantProcs := 1
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		wantProcs, _ = strconv.Atoi(v)
	}
	if ready.Procs != wantProcs {
		t.Errorf("standin serve runs with GOMAXPROCS %d, want %d", ready.Procs, wantProcs)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// stop sends SIGTERM and requires a clean exit.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-d.done; err != nil {
		t.Fatalf("standin serve after SIGTERM: %v\n%s", err, d.stderr)
	}
	d.done <- nil
}

type cliResult struct {
	stdout, stderr string
	code           int
}

func (d *daemon) docker(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command("docker", args...)
	// Only our settings: CI points DOCKER_HOST (and maybe a context) at a dockerd.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DOCKER_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "DOCKER_HOST=unix://"+d.socket, "DOCKER_CONFIG="+t.TempDir(), "DOCKER_CLI_HINTS=false")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("docker %v: %v", args, err)
	}
	return cliResult{out.String(), errb.String(), code}
}

func (d *daemon) mustDocker(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := d.docker(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("docker %v: exit %d\nstdout: %s\nstderr: %s\nstandin log: %s", args, r.code, r.stdout, r.stderr, d.stderr)
	}
	return r.stdout
}

func TestDockerCLI(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "docker")
	bin := buildStandin(t)
	d := startStandin(t, bin, "")
	const img = "sealbench/busybox:e2e"

	if out := d.mustDocker(t, "", "version"); !strings.Contains(out, "sealbench stand-in") || !strings.Contains(out, "API version:") {
		t.Errorf("docker version:\n%s", out)
	}
	tarPath := filepath.Join(t.TempDir(), "img.tar")
	os.WriteFile(tarPath, busyboxSaveTar(t, img), 0o644)
	if out := d.mustDocker(t, "", "load", "-i", tarPath); !strings.Contains(out, "Loaded image: "+img) {
		t.Errorf("docker load: %q", out)
	}
	if out := d.mustDocker(t, "", "images", "--format", "{{.Repository}}:{{.Tag}}"); strings.TrimSpace(out) != img {
		t.Errorf("docker images: %q", out)
	}

	// docker run attaches, waits and removes; stdout and stderr stay apart.
	r := d.docker(t, "", "run", "--rm", "--network", "none", img, "sh", "-c", "echo out; echo err >&2; exit 5")
	if r.code != 5 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("docker run --rm: %+v", r)
	}
	if out := d.mustDocker(t, "", "ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Errorf("after run --rm, containers remain: %q", out)
	}

	id := strings.TrimSpace(d.mustDocker(t, "", "run", "-d", "--network", "none", "--label", "sealbench.e2e=yes", "--name", "e2e", img, "sleep", "1000"))
	if len(id) != 64 {
		t.Fatalf("docker run -d printed %q, want an ID", id)
	}
	r = d.docker(t, "", "exec", "e2e", "sh", "-c", "echo o; echo e >&2; exit 4")
	if r.code != 4 || r.stdout != "o\n" || r.stderr != "e\n" {
		t.Errorf("docker exec: %+v", r)
	}
	r = d.docker(t, "piped in", "exec", "-i", "e2e", "cat")
	if r.code != 0 || r.stdout != "piped in" {
		t.Errorf("docker exec -i: %+v", r)
	}
	r = d.docker(t, "", "exec", "-u", "nobody", "e2e", "id", "-u")
	if r.code != 0 || r.stdout != "65534\n" {
		t.Errorf("docker exec -u nobody: %+v", r)
	}
	other := strings.TrimSpace(d.mustDocker(t, "", "run", "-d", "--network", "none", "--label", "sealbench.e2e=no", img, "sleep", "1000"))
	if out := d.mustDocker(t, "", "ps", "-a", "--filter", "label=sealbench.e2e=yes", "--format", "{{.ID}} {{.Names}}"); strings.TrimSpace(out) != id[:12]+" e2e" {
		t.Errorf("docker ps --filter label: %q", out)
	}
	if out := d.mustDocker(t, "", "ps", "-aq", "--filter", "label=sealbench.e2e"); len(strings.Fields(out)) != 2 {
		t.Errorf("docker ps --filter label (key only): %q", out)
	}
	d.mustDocker(t, "", "rm", "-f", "e2e")
	if out := d.mustDocker(t, "", "ps", "-aq", "--filter", "label=sealbench.e2e=yes"); strings.TrimSpace(out) != "" {
		t.Errorf("after rm -f: %q", out)
	}
	// Logs keep the streams apart; wait reports the exit code.
	short := strings.TrimSpace(d.mustDocker(t, "", "run", "-d", "--network", "none", img, "sh", "-c", "echo to-log; echo err-log >&2; exit 2"))
	if out := d.mustDocker(t, "", "wait", short); strings.TrimSpace(out) != "2" {
		t.Errorf("docker wait: %q", out)
	}
	r = d.docker(t, "", "logs", short)
	if r.code != 0 || r.stdout != "to-log\n" || r.stderr != "err-log\n" {
		t.Errorf("docker logs: %+v", r)
	}
	if out := d.mustDocker(t, "", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}} {{.Config.Hostname}}", short); strings.TrimSpace(out) != "exited 2 "+short[:12] {
		t.Errorf("docker inspect: %q", out)
	}
	d.mustDocker(t, "", "rm", short)
	// Stop and start again, then leave it running for the shutdown.
	d.mustDocker(t, "", "stop", "-t", "5", other)
	if out := d.mustDocker(t, "", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", other); strings.TrimSpace(out) != "exited 143" {
		t.Errorf("after docker stop: %q", out)
	}
	d.mustDocker(t, "", "start", other)
	if r := d.docker(t, "", "rmi", img); r.code == 0 {
		t.Errorf("docker rmi of an image a container uses succeeded: %+v", r)
	}
	// The other container keeps running: stopping the stand-in must end it.
	d.stop(t)
	if _, err := os.Lstat(d.socket); !os.IsNotExist(err) {
		t.Errorf("socket still there after SIGTERM: %v", err)
	}
	inv, err := inventory.Read(d.state)
	if err != nil {
		t.Fatal(err)
	}
	if left := inv.Leftovers(); len(left) > 0 {
		t.Errorf("left behind after SIGTERM: %v", left)
	}
	if len(inv.Images) != 1 {
		t.Errorf("images kept across restarts: %+v", inv.Images)
	}

	// A second run on the same state: the image is still there and rmi works.
	d2 := startStandin(t, bin, inv.StateDir)
	if out := d2.mustDocker(t, "", "rmi", img); !strings.Contains(out, "Untagged: "+img) || !strings.Contains(out, "Deleted: sha256:") {
		t.Errorf("docker rmi: %q", out)
	}
	if out := d2.mustDocker(t, "", "images", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("images after rmi: %q", out)
	}
	d2.stop(t)
}

func TestServeRefusesAnUnsafeSocketDirectory(t *testing.T) {
	bin := buildStandin(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	cmd := exec.Command(bin, "serve", "--socket", filepath.Join(dir, "s.sock"), "--state", filepath.Join(t.TempDir(), "state"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(string(out), "mode 0700") {
		t.Errorf("serve with a 0755 socket directory: %v\n%s", err, out)
	}
}

// TestCrashLeavesNothing: when the stand-in dies without cleaning up
// (SIGKILL), its Sandboxes notice their control sockets close and end, and
// with them their namespaces and mounts; the next stand-in on the same
// state directory clears what is left on disk.
func TestCrashLeavesNothing(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "docker")
	bin := buildStandin(t)
	d := startStandin(t, bin, "")
	tarPath := filepath.Join(t.TempDir(), "img.tar")
	os.WriteFile(tarPath, busyboxSaveTar(t, "sealbench/busybox:crash"), 0o644)
	d.mustDocker(t, "", "load", "-i", tarPath)
	d.mustDocker(t, "", "run", "-d", "--network", "none", "sealbench/busybox:crash", "sleep", "1000")
	inv, err := inventory.Read(d.state)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Processes) != 1 {
		t.Fatalf("want one Sandbox init running, inventory says %+v", inv)
	}
	d.cmd.Process.Kill()
	<-d.done
	d.done <- nil
	// Not a timing assertion: the inits go as soon as they read EOF; the
	// deadline only keeps a broken build from hanging the test run.
	deadline := time.Now().Add(time.Minute)
	for {
		if inv, err = inventory.Read(d.state); err != nil {
			t.Fatal(err)
		}
		if len(inv.Processes) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sandbox inits %v still running a minute after the stand-in was killed", inv.Processes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(inv.Mounts) != 0 {
		t.Errorf("mounts left on the host: %v", inv.Mounts)
	}
	d2 := startStandin(t, bin, d.state)
	d2.stop(t)
	inv, err = inventory.Read(d.state)
	if err != nil {
		t.Fatal(err)
	}
	if left := inv.Leftovers(); len(left) > 0 {
		t.Errorf("after a restart and a clean stop: %v", left)
	}
}
