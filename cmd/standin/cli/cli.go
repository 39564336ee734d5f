//go:build linux

// Package cli is the standin command line: `serve` runs the stand-in in
// the foreground, `inventory` lists what a state directory holds for the
// audit.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/internal/version"
	"github.com/sealbench/sealbench/standin"
	"github.com/sealbench/sealbench/standin/inventory"
)

// Exit codes, stable and documented in the root command's help.
const (
	ExitOK        = cliutil.ExitOK // success; serve: stopped cleanly by SIGTERM or SIGINT
	ExitLeftovers = 1              // inventory: the state directory holds what a stopped stand-in must not leave
	ExitUnusable  = cliutil.ExitUnusable
	ExitFailed    = cliutil.ExitFailed
)

const exitCodesHelp = `Exit codes:
  0    success (serve: stopped cleanly by SIGTERM or SIGINT)
  1    inventory: leftovers found (containers, mounts, processes, or a running stand-in)
  3    unusable input: bad flags; an unsafe or missing socket directory, or a
       socket path over 107 bytes; a state path that is a file, or holds ','
       or ':'; a state directory in use (serve refuses each before it
       creates anything)
  4    the operation failed for another reason`

type global struct {
	json   bool
	stdout io.Writer
	stderr io.Writer
}

type userError = cliutil.UserError

func writeJSON(w io.Writer, v any) error { return cliutil.WriteJSON(w, v) }

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &global{stdout: stdout, stderr: stderr}
	return cliutil.Run(ctx, newRoot(g), args, stdout, stderr, &g.json, classify)
}

func classify(err error) (int, string, bool) {
	switch {
	case errors.Is(err, standin.ErrUnsafeSocketDir):
		return ExitUnusable, "give --socket a path in a directory of its own (it is created with mode 0700 when missing, under an existing parent)", true
	case errors.Is(err, standin.ErrConflict):
		return ExitUnusable, "another stand-in is using this state directory or socket; stop it, or pick other paths", true
	case errors.Is(err, standin.ErrBadInput):
		return ExitUnusable, "", true
	}
	return 0, "", false
}

func newRoot(g *global) *cobra.Command {
	root := &cobra.Command{
		Use:   "standin",
		Short: "The Docker Engine API stand-in: Sandboxes as Linux namespaces, no Docker",
		Long: `standin answers the Docker Engine API calls the sealbench runner makes (ping,
version, info, image load/list/inspect/remove, containers, exec with the
multiplexed stream) on a unix socket, and runs each Sandbox as mount, PID, UTS,
IPC, network (loopback only) and cgroup namespaces over the image's layers.

It listens on a unix socket only, never TCP; the socket's directory is 0700,
the socket 0600, and connections from other users are refused.`,
		Example: `  # Run in the foreground; SIGTERM stops it and every Sandbox cleanly
  standin serve --socket /run/sealbench/standin.sock --state /var/lib/sealbench/standin

  # Talk to it with the docker CLI
  DOCKER_HOST=unix:///run/sealbench/standin.sock docker version

  # After it stopped: what does the state directory hold?
  standin inventory --state /var/lib/sealbench/standin --json`,
		Version: version.Version,
	}
	root.SetVersionTemplate("standin {{.Version}}\n")
	cliutil.Prepare(root, &g.json, exitCodesHelp)
	root.AddCommand(newServe(g), newInventory(g), newVersion(g), newDial(g), newMux(g))
	return root
}

func newServe(g *global) *cobra.Command {
	var socket, state string
	c := &cobra.Command{
		Use:   "serve --socket PATH --state DIR",
		Short: "Serve the Engine API on a unix socket, in the foreground",
		Long: `serve runs the stand-in until SIGTERM or SIGINT, then stops every Sandbox
(their processes, mounts and namespaces go with them), removes the containers'
files and the socket, and exits 0. It is ready once the socket accepts
connections; with --json it prints one JSON line then.

Both paths are checked before anything is created: --socket must be at most
107 bytes, in a directory of this user's with mode 0700 (or a missing one
under an existing parent, which serve makes 0700), with nothing but a stale
socket at the path; --state must be a directory, or nothing yet, with no ','
or ':' in its path. Each refusal exits 3 and leaves nothing behind.

It runs Go code on one CPU at a time (GOMAXPROCS=1) unless $GOMAXPROCS says
otherwise: it answers one runner's calls one after another, and with more,
the Go scheduler wakes an idle thread on another CPU for each message, on
the CPUs the measured commands need. On a 2-CPU VM one CPU takes an exec's
round trip from 1.71x a bare fork+exec+wait to 1.63x (make bench-exec);
loading an image takes as long either way.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Getenv("GOMAXPROCS") == "" {
				runtime.GOMAXPROCS(standin.DaemonProcs)
			}
			logf := func(format string, args ...any) {
				fmt.Fprintf(g.stderr, "standin: "+format+"\n", args...)
			}
			return standin.Serve(cmd.Context(), standin.ServeOptions{
				Socket:  socket,
				Options: standin.Options{StateDir: state, Logf: logf},
				Ready: func(sock string) {
					if g.json {
						json.NewEncoder(g.stdout).Encode(map[string]any{"ready": true, "socket": sock, "state": state, "pid": os.Getpid(),
							"version": version.Version, "procs": runtime.GOMAXPROCS(0)})
						return
					}
					logf("listening on unix://%s (state %s, GOMAXPROCS %d)", sock, state, runtime.GOMAXPROCS(0))
				},
			})
		},
	}
	c.Flags().StringVar(&socket, "socket", "", "the unix socket to listen on (its directory is made 0700)")
	c.Flags().StringVar(&state, "state", "", "the state directory: images, layers, Sandboxes' files")
	c.MarkFlagRequired("socket")
	c.MarkFlagRequired("state")
	return c
}

func newInventory(g *global) *cobra.Command {
	var state string
	c := &cobra.Command{
		Use:   "inventory --state DIR",
		Short: "List what a state directory holds, and fail if a stopped stand-in left anything behind",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if st, err := os.Stat(state); err != nil || !st.IsDir() {
				why := "it is not a directory"
				if err != nil {
					why = err.Error()
				}
				return cliutil.Usagef("give --state the directory `standin serve --state` was given", "state directory %q: %s", state, why)
			}
			inv, err := inventory.Read(state)
			if err != nil {
				return err
			}
			left := inv.Leftovers()
			if g.json {
				writeJSON(g.stdout, map[string]any{"inventory": inv, "leftovers": left})
			} else {
				fmt.Fprintf(g.stdout, "state directory %s\n", inv.StateDir)
				for _, im := range inv.Images {
					fmt.Fprintf(g.stdout, "  image %s %s\n", im.ID, strings.Join(im.Tags, " "))
				}
				fmt.Fprintf(g.stdout, "  %d layers\n", len(inv.Layers))
				for _, l := range left {
					fmt.Fprintf(g.stdout, "  LEFT BEHIND: %s\n", l)
				}
			}
			if len(left) > 0 {
				return &userError{Code: ExitLeftovers, Err: fmt.Errorf("state directory %s: %d leftovers", inv.StateDir, len(left)),
					Hint: "stop the stand-in (SIGTERM) and run inventory again; anything still listed is a leak"}
			}
			return nil
		},
	}
	c.Flags().StringVar(&state, "state", "", "the state directory to list")
	c.MarkFlagRequired("state")
	return c
}

func newVersion(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if g.json {
				return writeJSON(g.stdout, map[string]any{"version": version.Version, "apiVersion": standin.APIVersion})
			}
			fmt.Fprintf(g.stdout, "standin %s (Engine API %s)\n", version.Version, standin.APIVersion)
			return nil
		},
	}
}
