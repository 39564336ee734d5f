package qemu_test

import (
	"testing"

	"github.com/sealbench/sealbench/provision/internal/vmtest"
)

// TestMain runs this test binary as the link when the target starts it
// (LinkCommand: this binary and qemu.LinkSubcommand), as `sealbench
// qemu-link` would.
func TestMain(m *testing.M) { vmtest.Main(m) }
