package main

import (
	"bytes"
	"os"
	"testing"
)

// TestUpToDate: the checked-in generated files are what the generator
// writes from the go-fuse this module requires. Run `go generate
// ./layerfs/...` when they are not.
func TestUpToDate(t *testing.T) {
	dir, err := fuseDir()
	if err != nil {
		t.Fatal(err)
	}
	for mode, file := range map[string]string{"layerfs": "../../fuseops_gen.go", "dev": "../../uring/devfs_gen.go"} {
		want, err := generate(dir, mode)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./layerfs/...", file)
		}
	}
}
