package qemu_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/provision/qemu"
)

// TestMain runs this test binary as the link when the target starts it
// (LinkCommand: this binary and qemu.LinkSubcommand), as `sealbench
// qemu-link` would.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == qemu.LinkSubcommand {
		cfg, err := qemu.ParseLinkArgs(os.Args[2:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		if err := qemu.ServeLink(context.Background(), cfg, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	provisiontest.Main(m)
}

// self is this test binary, which serves as the link.
func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
