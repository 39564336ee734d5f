package runs

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/ledger"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/standin"
)

// TestARefusedImageLoadLeavesNothingToTearDown: the ledger names an
// image only once it may exist. An Engine that refuses the connection
// (a socket nothing listens on, as a stopped dockerd leaves) cannot have
// been given the image: nothing is recorded. An Engine that refuses the
// load (a stand-in given a tar that is no image) and then has no such
// image made nothing: the entry is retracted. Either way the run's
// teardown, with that Engine gone, removes everything, the run
// directory included.
func TestARefusedImageLoadLeavesNothingToTearDown(t *testing.T) {
	notImage := filepath.Join(t.TempDir(), "image.tar")
	if err := os.WriteFile(notImage, []byte("not a tar of an image"), 0o600); err != nil {
		t.Fatal(err)
	}
	img := engine.Image{Tar: notImage, Ref: "sealbench/sandbox:refused", ID: manifests.DigestOf([]byte("the refused image"))}
	ctx := context.Background()

	load := func(t *testing.T, run *Run, endpoint string) error {
		t.Helper()
		cli, err := engine.NewClient(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		return engine.LoadImage(ctx, cli, run.Ledger, "far", endpoint, img)
	}
	tornDown := func(t *testing.T, run *Run) {
		t.Helper()
		run.Close()
		if _, err := Teardown(ctx, run.Dir, TeardownOptions{}); err != nil {
			t.Fatalf("teardown: %v", err)
		}
		if _, err := os.Stat(run.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("teardown kept the run directory: %v", err)
		}
	}

	t.Run("connection refused", func(t *testing.T) {
		_, run := newTestRun(t)
		sock := filepath.Join(testenv.ShortTempDir(t, "sbe-"), "engine.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
		if err := load(t, run, "unix://"+sock); err == nil {
			t.Fatal("LoadImage into an Engine that refuses the connection succeeded")
		}
		for _, e := range run.Ledger.Entries() {
			if e.Kind == manifests.ResourceImage {
				t.Errorf("the ledger names %s, which the Engine was never asked to load", e.Name())
			}
		}
		tornDown(t, run)
	})

	t.Run("load refused", func(t *testing.T) {
		_, run := newTestRun(t)
		dir := testenv.ShortTempDir(t, "sbe-")
		sock := filepath.Join(dir, "engine.sock")
		sctx, stop := context.WithCancel(ctx)
		ready, served := make(chan struct{}), make(chan error, 1)
		go func() {
			served <- standin.Serve(sctx, standin.ServeOptions{Socket: sock, Options: standin.Options{StateDir: filepath.Join(dir, "state")},
				Ready: func(string) { close(ready) }})
		}()
		select {
		case <-ready:
		case err := <-served:
			t.Fatalf("the stand-in: %v", err)
		}
		err := load(t, run, "unix://"+sock)
		if err == nil {
			t.Fatal("LoadImage of a tar that is no image succeeded")
		}
		t.Logf("the refused load: %v", err)
		stop() // the Engine is gone by teardown, as a VM's is once it stops
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		raw, _, err := ledger.Read(run.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range raw {
			if e.Kind == manifests.ResourceImage {
				t.Errorf("the ledger still names %s as made", e.Name())
			}
		}
		b, _ := os.ReadFile(filepath.Join(run.Dir, manifests.LedgerFile))
		if !strings.Contains(string(b), `"retracts":`) {
			t.Errorf("the ledger has no retraction of the image:\n%s", b)
		}
		tornDown(t, run)
	})
}
