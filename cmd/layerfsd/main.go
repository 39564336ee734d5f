//go:build linux

// Command layerfsd is the LayerFS daemon and its command line: Stores,
// Layers, and FUSE Workspaces with a control socket. See `layerfsd --help`.
package main

import "github.com/sealbench/sealbench/layerfs/cli"

func main() { cli.Run() }
