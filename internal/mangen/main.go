//go:build linux

// Command mangen writes the man pages of sealbench and layerfsd, one per
// command (sealbench.1, sealbench-run.1, ...), from their command trees:
// their help, flags and examples, as `--help` shows them. make install
// runs it; it is not installed itself.
//
//	go run ./internal/mangen DIR
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	layerfsd "github.com/sealbench/sealbench/cmd/layerfsd/cli"
	sealbench "github.com/sealbench/sealbench/cmd/sealbench/cmd"
	"github.com/sealbench/sealbench/internal/version"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/mangen DIR")
		os.Exit(3)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(4)
	}
	// The pages carry the commit's date, not today's, so that the same
	// tree makes the same pages.
	date := commitDate()
	for _, root := range []*cobra.Command{sealbench.Command(os.Stdout, os.Stderr), layerfsd.Command(os.Stdout)} {
		root.DisableAutoGenTag = true
		header := &doc.GenManHeader{Title: root.Name(), Section: "1", Source: root.Name() + " " + version.Version, Manual: "sealbench manual", Date: &date}
		if err := doc.GenManTree(root, header, dir); err != nil {
			fmt.Fprintf(os.Stderr, "mangen: %s: %v\n", root.Name(), err)
			os.Exit(4)
		}
	}
}

// commitDate is $SOURCE_DATE_EPOCH as a time, or the Unix epoch.
func commitDate() time.Time {
	var sec int64
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		fmt.Sscan(s, &sec)
	}
	return time.Unix(sec, 0).UTC()
}
