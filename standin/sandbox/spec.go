//go:build linux

// Package sandbox runs a Sandbox as a set of Linux namespaces, with no
// container runtime: the stand-in's own binary, re-executed as a small init
// inside fresh mount, PID, UTS, IPC, network and cgroup namespaces, mounts
// the image's layers (overlayfs) as the root, pivots into it, starts the
// main process, and then starts exec'd processes on request.
//
// # Processes
//
// The host side (Start, Sandbox.Exec) talks to the init over a SOCK_SEQPACKET
// socket pair: one JSON message per request, with the process's stdio
// passed as file descriptors (SCM_RIGHTS). An exec therefore costs a
// message and a fork in namespaces that already exist, not new namespaces.
//
// # Privileges
//
// An unprivileged exec (the default) runs with no capabilities in any set
// (the bounding set is emptied, so even uid 0 gains none at execve),
// no_new_privs, a seccomp filter that refuses namespace and mount system
// calls, only fds 0-2 open, and its working directory inside the Sandbox.
// The main process and privileged execs keep the capabilities the container
// was granted (Spec.Caps). The init sets these up per thread: a goroutine
// locks itself to an OS thread, restricts that thread, forks from it, and
// the thread is discarded afterwards.
//
// # Network
//
// Every Sandbox has its own network namespace with only the loopback
// interface, which the init brings up. There is no other network, ever.
package sandbox

import (
	"fmt"
	"strings"
)

// Spec is everything the init needs to build a Sandbox. Paths other than
// Mount.Target and Device.Container are host paths.
type Spec struct {
	ID       string
	Hostname string

	// The root: an overlay of LowerDirs (topmost first) with UpperDir and
	// WorkDir, mounted at RootfsDir (an empty directory) inside the
	// Sandbox's own mount namespace, so the host never sees the mount.
	RootfsDir      string
	LowerDirs      []string
	UpperDir       string
	WorkDir        string
	ReadonlyRootfs bool

	Mounts  []Mount
	Devices []Device

	// Caps are the capabilities the container was granted: the main
	// process and privileged execs keep them, and only them. Privileged
	// grants every capability.
	Caps       []Cap
	Privileged bool
	// Seccomp applies the filter (see seccomp.go) to the main process and
	// privileged execs too; unprivileged execs always get it.
	Seccomp bool

	Process Process // the main process
}

// Mount is a bind mount or a tmpfs inside the Sandbox.
type Mount struct {
	Type     string // "bind" or "tmpfs"
	Source   string // bind: the host path
	Target   string // absolute path inside the Sandbox
	ReadOnly bool
	// tmpfs: "size" (bytes, or with k/m/g) and "mode" (octal), as tmpfs takes them.
	Size string
	Mode string
	// bind: mounts under Source come too (Docker's default rbind).
	Recursive bool
}

// Device is a host device node made visible inside the Sandbox.
type Device struct {
	Host      string
	Container string
}

// Process is one process to start inside the Sandbox.
type Process struct {
	Args []string
	Env  []string
	Cwd  string // absolute, inside the Sandbox; "" is "/"
	User string // "", "uid", "uid:gid", "name" or "name:group", resolved in the Sandbox's /etc/passwd and /etc/group
	// Privileged keeps the container's capabilities; otherwise the
	// process gets none, no_new_privs and the seccomp filter.
	Privileged bool
}

// Validate reports every problem with the spec, each naming its field.
func (s *Spec) Validate() error {
	var errs []string
	add := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if s.ID == "" {
		add("ID: empty")
	}
	if s.RootfsDir == "" || len(s.LowerDirs) == 0 || s.UpperDir == "" || s.WorkDir == "" {
		add("RootfsDir, LowerDirs, UpperDir, WorkDir: all required")
	}
	for _, p := range append([]string{s.RootfsDir, s.UpperDir, s.WorkDir}, s.LowerDirs...) {
		if strings.ContainsAny(p, ",:\n") {
			add("overlay path %q: contains ',' or ':', which overlayfs options cannot carry", p)
		}
	}
	for i, m := range s.Mounts {
		if !strings.HasPrefix(m.Target, "/") {
			add("Mounts[%d].Target %q: not absolute", i, m.Target)
		}
		switch m.Type {
		case "bind":
			if !strings.HasPrefix(m.Source, "/") {
				add("Mounts[%d].Source %q: not absolute", i, m.Source)
			}
		case "tmpfs":
		default:
			add("Mounts[%d].Type %q: want bind or tmpfs", i, m.Type)
		}
	}
	for i, d := range s.Devices {
		if !strings.HasPrefix(d.Host, "/") || !strings.HasPrefix(d.Container, "/") {
			add("Devices[%d]: paths must be absolute (%q, %q)", i, d.Host, d.Container)
		}
	}
	if len(s.Process.Args) == 0 {
		add("Process.Args: empty (no command, and the image has none)")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid sandbox spec: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Messages between the host and the init, one JSON object per datagram.
type message struct {
	Kind    string   `json:"kind"`
	Error   string   `json:"error,omitempty"`
	Pid     int      `json:"pid,omitempty"`
	Status  int      `json:"status"`
	Nanos   int64    `json:"nanos,omitempty"`   // exit: the process's lifetime, fork to reap
	Signal  int      `json:"signal,omitempty"`  // signal
	Process *Process `json:"process,omitempty"` // exec
	Stdin   bool     `json:"stdin,omitempty"`   // exec: a stdin fd is passed
}

const (
	kindReady  = "ready"
	kindError  = "error"
	kindExit   = "exit"
	kindExec   = "exec"
	kindStart  = "started"
	kindSignal = "signal"
)
