package daemonapi

import (
	"strings"
	"time"
)

// Command is one of the builders below (InitCmd, ImportCmd, MountCmd,
// CommitCmd, StatsCmd, UnmountCmd): a layerfsd command line, without the
// program's name. Required flags are always written, so that a missing value
// is layerfsd's usage error (exit 2) and not a silently different command;
// optional ones only when set. Every builder asks for --json, whose answer
// the matching Decode function reads.
type Command interface {
	// Args returns the command line for exec.
	Args() []string
}

// Shell returns c's command line quoted for a POSIX shell; prefix the
// program, as in `"$L " + daemonapi.Shell(cmd)`.
func Shell(c Command) string {
	args := c.Args()
	q := make([]string, len(args))
	for i, s := range args {
		q[i] = Quote(s)
	}
	return strings.Join(q, " ")
}

// InitCmd is `layerfsd init`: a new, empty Store. Decode with DecodeInit.
type InitCmd struct {
	Store   string
	Profile Profile // empty: layerfsd's default (durable)
}

// Args returns the command line for exec.
func (c InitCmd) Args() []string {
	a := []string{"init", "--store", c.Store}
	a = optional(a, "--profile", string(c.Profile))
	return append(a, "--json")
}

// ImportCmd is `layerfsd import`: a directory tree as a new Layer. Decode
// with DecodeLayer.
type ImportCmd struct {
	Store   string
	From    string
	Message string
	Parent  string // Layer id or unique prefix; empty: none
}

// Args returns the command line for exec.
func (c ImportCmd) Args() []string {
	a := []string{"import", "--store", c.Store, "--from", c.From}
	a = optional(a, "-m", c.Message)
	a = optional(a, "--parent", c.Parent)
	return append(a, "--json")
}

// MountCmd is `layerfsd mount`: a Workspace served by a background daemon;
// it returns once the Workspace is ready. Decode with DecodeReady.
type MountCmd struct {
	Store     string
	Workspace string // an empty directory
	Control   string // the control socket to create
	Layer     string // Layer id or unique prefix; empty: the newest Layer
	// OverlayDir holds the overlay's data files; empty: inside the Store.
	OverlayDir    string
	NoPassthrough bool
	// FuseTransport is auto, uring or dev; empty: layerfsd's default
	// (auto: io_uring where the kernel grants it, /dev/fuse otherwise).
	FuseTransport string
	// ReadyTimeout bounds the wait for the daemon; 0: layerfsd's default.
	ReadyTimeout time.Duration
}

// Args returns the command line for exec.
func (c MountCmd) Args() []string {
	a := []string{"mount", "--store", c.Store, "--workspace", c.Workspace, "--control", c.Control}
	a = optional(a, "--layer", c.Layer)
	a = optional(a, "--overlay-dir", c.OverlayDir)
	if c.NoPassthrough {
		a = append(a, "--no-passthrough")
	}
	a = optional(a, "--fuse-transport", c.FuseTransport)
	a = optionalDuration(a, "--ready-timeout", c.ReadyTimeout)
	return append(a, "--json")
}

// CommitCmd is `layerfsd commit`: the Workspace as a new Layer, or
// UpToDate. Decode with DecodeCommit.
type CommitCmd struct {
	Control string
	Message string
	Timeout time.Duration // 0: layerfsd's default
}

// Args returns the command line for exec.
func (c CommitCmd) Args() []string {
	return controlArgs("commit", c.Control, c.Timeout, optional(nil, "-m", c.Message)...)
}

// StatsCmd is `layerfsd stats`: the Workspace's telemetry. Decode with
// DecodeStats.
type StatsCmd struct {
	Control string
	Timeout time.Duration // 0: layerfsd's default
}

// Args returns the command line for exec.
func (c StatsCmd) Args() []string { return controlArgs("stats", c.Control, c.Timeout) }

// UnmountCmd is `layerfsd unmount`: uncommitted changes are discarded and
// the daemon exits. Decode with DecodeUnmount.
type UnmountCmd struct {
	Control string
	Timeout time.Duration // 0: layerfsd's default
}

// Args returns the command line for exec.
func (c UnmountCmd) Args() []string { return controlArgs("unmount", c.Control, c.Timeout) }

// controlArgs is the command line of a subcommand that asks a running
// daemon through its control socket.
func controlArgs(verb, control string, timeout time.Duration, more ...string) []string {
	a := []string{verb, "--control", control}
	a = optionalDuration(a, "--timeout", timeout)
	a = append(a, more...)
	return append(a, "--json")
}

func optional(a []string, flag, v string) []string {
	if v == "" {
		return a
	}
	return append(a, flag, v)
}

func optionalDuration(a []string, flag string, d time.Duration) []string {
	if d == 0 {
		return a
	}
	return append(a, flag, d.String())
}

// Quote quotes s for a POSIX shell: as is when it holds only characters no
// shell treats specially, in single quotes otherwise.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
