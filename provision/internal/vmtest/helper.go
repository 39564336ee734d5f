package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/provisiontest"
)

// Main runs the tests (provisiontest.Main), unless this test binary was
// started as a registered target's hidden command (the microsandbox
// proxy, the qemu link): then it serves that command as `sealbench NAME`
// would, and exits 3 when the command refuses its arguments, 1 when it
// fails. The targets under test start Self for their helper.
func Main(m *testing.M) {
	if len(os.Args) > 1 {
		for _, s := range provision.Subcommands() {
			if s.Name == os.Args[1] {
				os.Exit(serve(s, os.Args[2:]))
			}
		}
	}
	provisiontest.Main(m)
}

func serve(s provision.Subcommand, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := s.Run(ctx, args, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) })
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, err)
	var ue *provision.UsageError
	if errors.As(err, &ue) {
		return 3
	}
	return 1
}

// Self is this test binary: the command a target under test starts for
// its helper, served by Main.
func Self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
