package daemonapi

import (
	"strings"
	"time"
)

// The command builders below write layerfsd's command lines, without the
// program's name: Args for exec, Shell for a shell (prefix the program, as in
// `"$L " + cmd.Shell()`). Required flags are always written, so that a
// missing value is layerfsd's usage error (exit 2) and not a silently
// different command; optional ones only when set. Every builder asks for
// --json, whose answer the matching Decode function reads.

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

// Shell returns Args quoted for a POSIX shell.
func (c InitCmd) Shell() string { return shell(c.Args()) }

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

// Shell returns Args quoted for a POSIX shell.
func (c ImportCmd) Shell() string { return shell(c.Args()) }

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
	a = optionalDuration(a, "--ready-timeout", c.ReadyTimeout)
	return append(a, "--json")
}

// Shell returns Args quoted for a POSIX shell.
func (c MountCmd) Shell() string { return shell(c.Args()) }

// CommitCmd is `layerfsd commit`: the Workspace as a new Layer, or
// UpToDate. Decode with DecodeCommit.
type CommitCmd struct {
	Control string
	Message string
	Timeout time.Duration // 0: layerfsd's default
}

// Args returns the command line for exec.
func (c CommitCmd) Args() []string {
	a := []string{"commit", "--control", c.Control}
	a = optional(a, "-m", c.Message)
	a = optionalDuration(a, "--timeout", c.Timeout)
	return append(a, "--json")
}

// Shell returns Args quoted for a POSIX shell.
func (c CommitCmd) Shell() string { return shell(c.Args()) }

// StatsCmd is `layerfsd stats`: the Workspace's telemetry. Decode with
// DecodeStats.
type StatsCmd struct {
	Control string
	Timeout time.Duration // 0: layerfsd's default
}

// Args returns the command line for exec.
func (c StatsCmd) Args() []string {
	a := []string{"stats", "--control", c.Control}
	a = optionalDuration(a, "--timeout", c.Timeout)
	return append(a, "--json")
}

// Shell returns Args quoted for a POSIX shell.
func (c StatsCmd) Shell() string { return shell(c.Args()) }

// UnmountCmd is `layerfsd unmount`: uncommitted changes are discarded and
// the daemon exits. Decode with DecodeUnmount.
type UnmountCmd struct {
	Control string
	Timeout time.Duration // 0: layerfsd's default
}

// Args returns the command line for exec.
func (c UnmountCmd) Args() []string {
	a := []string{"unmount", "--control", c.Control}
	a = optionalDuration(a, "--timeout", c.Timeout)
	return append(a, "--json")
}

// Shell returns Args quoted for a POSIX shell.
func (c UnmountCmd) Shell() string { return shell(c.Args()) }

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

// shell quotes each argument for a POSIX shell and joins them with spaces.
func shell(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		q[i] = Quote(s)
	}
	return strings.Join(q, " ")
}

// Quote quotes s for a POSIX shell: as is when it holds only characters no
// shell treats specially, in single quotes otherwise.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
