package main

import (
	"bytes"
	"os"
	"testing"
)

// TestUpToDate: the checked-in fuseops_gen.go is what the generator writes
// from the go-fuse this module requires. Run `go generate ./layerfs` when it
// is not.
func TestUpToDate(t *testing.T) {
	dir, err := fuseDir()
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../fuseops_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("layerfs/fuseops_gen.go is stale: run go generate ./layerfs")
	}
}
