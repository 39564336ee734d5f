//go:build linux

// Command standin is the Engine API stand-in: it answers the Docker Engine
// API calls the sealbench runner makes, on a unix socket, and runs each
// Sandbox as a set of Linux namespaces, with no Docker. It ships inside the
// sealed bundle. See `standin --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sealbench/sealbench/cmd/standin/cli"
	"github.com/sealbench/sealbench/standin/sandbox"
)

func main() {
	// Re-executed as a Sandbox's init: that is all this process will be.
	if sandbox.IsInit() {
		sandbox.InitMain()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
