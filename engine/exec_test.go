//go:build linux

package engine_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/standin"
	"github.com/sealbench/sealbench/standin/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsInit() { // the stand-in's Sandboxes re-execute this binary as their init
		sandbox.InitMain()
	}
	os.Exit(m.Run())
}

// TestExecerLikeTheOfficialClient runs the same execs through the Execer
// and through the official client, on the stand-in and on dockerd, and
// wants the same output, exit codes and refusals from both.
func TestExecerLikeTheOfficialClient(t *testing.T) {
	t.Run("standin", func(t *testing.T) {
		testenv.NeedRoot(t)
		base := testenv.ShortTempDir(t, "execer")
		srv, err := standin.New(standin.Options{StateDir: filepath.Join(base, "state"), Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		l, err := standin.Listen(filepath.Join(base, "run", "standin.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(srv)
		ts.Listener.Close()
		ts.Listener = l
		ts.Start()
		t.Cleanup(func() {
			if err := srv.Close(); err != nil {
				t.Errorf("closing the stand-in: %v", err)
			}
			ts.Close()
		})
		cli, err := engine.NewClient("unix://" + l.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		checkExecer(t, cli, ts.CloseClientConnections)
	})
	t.Run("dockerd", func(t *testing.T) {
		testenv.NeedDocker(t)
		cli, err := engine.NewClient("")
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		checkExecer(t, cli, nil)
	})
}

// checkExecer runs the checks on cli's Engine; dropIdle, when not nil,
// closes the Engine's ends of the connections it holds.
func checkExecer(t *testing.T, cli *client.Client, dropIdle func()) {
	ctx := context.Background()
	tag := "sealbench/busybox:execer-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	var img bytes.Buffer
	if _, err := testimage.Busybox(testenv.NeedCommand(t, "busybox"), tag, &img); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.ImageLoad(ctx, &img)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	start := func(cmd ...string) string {
		created, err := cli.ContainerCreate(ctx, &container.Config{Image: tag, Cmd: cmd},
			&container.HostConfig{NetworkMode: network.NetworkNone}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true}) })
		if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		return created.ID
	}
	id := start("sleep", "1000")
	x := engine.NewExecer(ctx, cli)
	defer x.Close()

	official := func(opts container.ExecOptions, stdin string) (string, string, int) {
		r := testenv.OfficialExec(t, cli, id, opts, stdin)
		return r.Stdout, r.Stderr, r.Code
	}
	ours := func(opts container.ExecOptions, stdin string) (string, string, int) {
		var in io.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		var stdout, stderr bytes.Buffer
		res, err := x.Exec(ctx, id, opts, in, &stdout, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if res.Running {
			t.Errorf("%v: still running after its stream ended", opts.Cmd)
		}
		if res.Pid == 0 && res.ExitCode != 126 && res.ExitCode != 127 {
			t.Errorf("%v: no pid", opts.Cmd)
		}
		return stdout.String(), stderr.String(), res.ExitCode
	}
	big := strings.Repeat("0123456789abcdef", 64<<10/16) // more than one read of the stream
	for _, c := range []struct {
		name   string
		opts   container.ExecOptions
		stdin  string
		stdout string // when not "": what both must print
		code   int
	}{
		{"true", container.ExecOptions{Cmd: []string{"/bin/true"}}, "", "", 0},
		{"exit code", container.ExecOptions{Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, "", "out\n", 3},
		{"working directory, user, environment", container.ExecOptions{Cmd: []string{"sh", "-c", "pwd; id -u; echo $X"},
			WorkingDir: "/tmp", User: "65534", Env: []string{"X=y"}}, "", "/tmp\n65534\ny\n", 0},
		{"stdin", container.ExecOptions{Cmd: []string{"sh", "-c", "cat; echo done"}}, big, big + "done\n", 0},
		{"not found", container.ExecOptions{Cmd: []string{"/no/such/program"}}, "", "", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.AttachStdout, c.opts.AttachStderr = true, true
			o1, e1, code1 := official(c.opts, c.stdin)
			o2, e2, code2 := ours(c.opts, c.stdin)
			if o1 != o2 || e1 != e2 || code1 != code2 {
				t.Errorf("official client: stdout %q, stderr %q, exit %d; Execer: stdout %q, stderr %q, exit %d",
					clip(o1), clip(e1), code1, clip(o2), clip(e2), code2)
			}
			if c.stdout != "" && o2 != c.stdout {
				t.Errorf("stdout %q, want %q", clip(o2), clip(c.stdout))
			}
			if c.code >= 0 && code2 != c.code {
				t.Errorf("exit %d, want %d", code2, c.code)
			}
			if c.code < 0 && code2 == 0 {
				t.Errorf("exit 0 for a program that does not exist")
			}
		})
	}

	t.Run("refusals", func(t *testing.T) {
		var ae *engine.AnswerError
		_, err := x.Exec(ctx, "no-such-container", container.ExecOptions{Cmd: []string{"true"}}, nil, io.Discard, io.Discard)
		if !errors.As(err, &ae) || ae.Status != 404 {
			t.Errorf("exec in a missing container: %v, want a 404 AnswerError", err)
		}
		stopped := start("true")
		testenv.Eventually(t, "the container to stop", 50*time.Millisecond, func() bool {
			insp, err := cli.ContainerInspect(ctx, stopped)
			return err == nil && !insp.State.Running
		})
		_, err = x.Exec(ctx, stopped, container.ExecOptions{Cmd: []string{"true"}}, nil, io.Discard, io.Discard)
		if !errors.As(err, &ae) || ae.Status != 409 {
			t.Errorf("exec in a stopped container: %v, want a 409 AnswerError", err)
		}
		if _, err := x.Exec(ctx, id, container.ExecOptions{Cmd: []string{"true"}, Tty: true}, nil, io.Discard, io.Discard); err == nil {
			t.Errorf("an exec with a TTY was not refused")
		}
	})

	if dropIdle != nil {
		t.Run("a kept connection the Engine closed", func(t *testing.T) {
			for range 3 {
				dropIdle()
				var out bytes.Buffer
				res, err := x.Exec(ctx, id, container.ExecOptions{Cmd: []string{"echo", "again"}, AttachStdout: true}, nil, &out, io.Discard)
				if err != nil || res.ExitCode != 0 || out.String() != "again\n" {
					t.Fatalf("exec after the Engine closed the kept connection: %v, exit %d, stdout %q", err, res.ExitCode, out.String())
				}
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := x.Exec(cctx, id, container.ExecOptions{Cmd: []string{"sleep", "1000"}, AttachStdout: true}, nil, io.Discard, io.Discard)
			done <- err
		}()
		testenv.Eventually(t, "the sleep to start", 20*time.Millisecond, func() bool {
			var out bytes.Buffer
			_, err := x.Exec(ctx, id, container.ExecOptions{Cmd: []string{"sh", "-c", "ps -o comm | grep -c '^sleep'"}, AttachStdout: true}, nil, &out, io.Discard)
			return err == nil && strings.TrimSpace(out.String()) == "2"
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled exec returned %v, want context.Canceled", err)
		}
	})
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
