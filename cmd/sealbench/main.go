// Command sealbench seals, provisions, verifies and runs filesystem
// benchmarks of sandbox backends. See `sealbench --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sealbench/sealbench/cmd/sealbench/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
