package runner

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/internal/testimage"
	"github.com/sealbench/sealbench/manifests"
)

// TestExecRestartsWhatTheEngineCouldNotStart drives dockerd to refuse an
// exec before its process starts (runc cannot chdir to a working directory
// that does not exist: exit 126, no pid, the reason on stdout), as runc
// does now and then under load. The exec is started again, and counted;
// once the cause is gone it runs; when it never goes, the step fails with
// dockerd's own words.
func TestExecRestartsWhatTheEngineCouldNotStart(t *testing.T) {
	testenv.NeedDocker(t)
	ctx := context.Background()
	cli, err := engine.NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const tag = "sealbench/busybox:runner-restart"
	var img bytes.Buffer
	if _, err := testimage.Busybox(testenv.NeedCommand(t, "busybox"), tag, &img); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.ImageLoad(ctx, &img)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body) // the load is done when its answer ends
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{}) })
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: tag, Cmd: []string{"sleep", "1000"}},
		&container.HostConfig{NetworkMode: network.NetworkNone}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{ex: engine.NewExecer(ctx, cli), id: created.ID, engine: manifests.EngineDockerd, timeout: time.Minute}

	t.Run("the cause goes", func(t *testing.T) {
		sb.restarts = 0
		sb.beforeRestart = func() {
			if _, err := sb.must(ctx, "making the directory", true, "/", "mkdir -p /appears && chown 65534 /appears", nil); err != nil {
				t.Fatal(err)
			}
		}
		r, err := sb.must(ctx, "reading stdin", false, "/appears", "pwd; cat", func() io.Reader { return strings.NewReader("fed once\n") })
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(r.stdout), "/appears\nfed once\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		if sb.restarts != 1 {
			t.Errorf("%d restarts, want 1", sb.restarts)
		}
	})

	t.Run("the cause stays", func(t *testing.T) {
		sb.restarts, sb.beforeRestart = 0, nil
		_, err := sb.must(ctx, "running in a directory that is not there", false, "/never", "true", nil)
		if err == nil {
			t.Fatal("an exec in a missing directory succeeded")
		}
		// dockerd's words, from stdout: "... chdir to cwd ("/never") ...".
		if msg := err.Error(); !strings.Contains(msg, "exit 126") || !strings.Contains(msg, `"/never"`) {
			t.Errorf("error %q does not say dockerd's reason", msg)
		}
		if sb.restarts != maxRestarts {
			t.Errorf("%d restarts, want %d", sb.restarts, maxRestarts)
		}
	})

	t.Run("a command that fails is not started again", func(t *testing.T) {
		sb.restarts = 0
		r, err := sb.exec(ctx, false, "/", "echo no >&2; exit 126", nil)
		if err != nil || r.code != 126 || sb.restarts != 0 {
			t.Errorf("exit %d, %d restarts, err %v; want exit 126 from the script, no restart", r.code, sb.restarts, err)
		}
	})
}
