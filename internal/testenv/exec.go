package testenv

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// ExecOut is what an exec printed and how it ended, as the Engine's
// inspect tells it.
type ExecOut struct {
	Stdout, Stderr string
	Code, Pid      int
}

// OfficialExec runs opts in container id as a user of the official client
// does: create (stdout and stderr attached, stdin when not empty), attach,
// stdin copied and closed, the stream demultiplexed by stdcopy, inspect.
// It fails tb on any error, and reports an exec still running once its
// stream has ended.
func OfficialExec(tb testing.TB, cli client.APIClient, id string, opts container.ExecOptions, stdin string) ExecOut {
	tb.Helper()
	ctx := context.Background()
	opts.AttachStdout, opts.AttachStderr, opts.AttachStdin = true, true, stdin != ""
	created, err := cli.ContainerExecCreate(ctx, id, opts)
	if err != nil {
		tb.Fatal(err)
	}
	hr, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if stdin != "" {
		go func() {
			io.Copy(hr.Conn, strings.NewReader(stdin))
			hr.CloseWrite()
		}()
	}
	var o, e bytes.Buffer
	_, err = stdcopy.StdCopy(&o, &e, hr.Reader)
	hr.Close()
	if err != nil {
		tb.Fatal(err)
	}
	insp, err := cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		tb.Fatal(err)
	}
	if insp.Running {
		tb.Errorf("exec %v still running after its stream ended", opts.Cmd)
	}
	return ExecOut{Stdout: o.String(), Stderr: e.String(), Code: insp.ExitCode, Pid: insp.Pid}
}
