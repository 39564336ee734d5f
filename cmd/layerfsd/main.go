//go:build linux

// Command layerfsd is the LayerFS daemon and its command line: Stores,
// Layers, and FUSE Workspaces with a control socket. See `layerfsd --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sealbench/sealbench/cmd/layerfsd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
