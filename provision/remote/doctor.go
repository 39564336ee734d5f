package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/sshx"
)

// The doctor's checks of a remote host, by name.
const (
	CheckSSH       = "ssh"       // reachable, host key known, logged in with a key
	CheckLinux     = "linux"     // uname -s says Linux
	CheckRoot      = "root"      // logged in as uid 0
	CheckSHA256Sum = "sha256sum" // coreutils' sha256sum, which checks copied files
	CheckDockerd   = "dockerd"   // the host's docker CLI reaches its dockerd
	CheckFUSE      = "fuse"      // /dev/fuse is there, for the stand-in's Sandboxes
)

// remoteNeeds are the checks a target kind needs of a remote host, as
// docs/design/remote-hosts.md has them: the stand-in needs a Linux kernel
// and root there, its Sandboxes /dev/fuse, and its copied bundle is
// checked with sha256sum; docker needs the host's dockerd, which its
// docker CLI reaches.
var remoteNeeds = map[string][]string{
	"local":  {CheckSSH, CheckLinux, CheckRoot, CheckSHA256Sum, CheckFUSE},
	"docker": {CheckSSH, CheckDockerd},
}

// doctorTimeout bounds the doctor's login and each of its commands: it
// looks, and a host that takes longer is not ready.
const doctorTimeout = 15 * time.Second

// Doctor looks at the remote hosts of specs over SSH (specs on this host
// are the local doctor's), each host once however many specs name it:
// whether it can be reached (host key known, a key accepted), its
// kernel, whether we are root there, sha256sum, and its dockerd when a
// docker spec names it. It says which specs could run there. Like the
// local doctor it only looks: it runs read-only commands, and changes
// nothing on the host.
func Doctor(ctx context.Context, specs []Spec, o Options) *provision.DoctorReport {
	r := &provision.DoctorReport{}
	byHost := map[string][]Spec{}
	var hosts []*Host
	for _, s := range specs {
		if s.Host == nil {
			continue
		}
		k := s.Host.String()
		if _, seen := byHost[k]; !seen {
			hosts = append(hosts, s.Host)
		}
		byHost[k] = append(byHost[k], s)
	}
	for _, h := range hosts {
		checks := lookAt(ctx, h, byHost[h.String()], o)
		r.Checks = append(r.Checks, checks...)
		ok := map[string]bool{}
		for _, c := range checks {
			ok[c.Name] = c.OK
		}
		for _, s := range byHost[h.String()] {
			t := provision.TargetReadiness{Target: s.Name, Host: h.String(), Needs: remoteNeeds[s.Kind]}
			if t.Needs == nil {
				t.Needs = []string{CheckSSH}
			}
			t.Ready = true
			for _, n := range t.Needs {
				t.Ready = t.Ready && ok[n]
			}
			if reg, found := provision.Lookup(s.Kind); !found || reg.Remote == nil {
				t.Ready = false
				t.Note = fmt.Sprintf("this sealbench cannot run %s on a remote host", s.Kind)
			}
			r.Targets = append(r.Targets, t)
		}
	}
	return r
}

// lookAt makes the checks of one host.
func lookAt(ctx context.Context, h *Host, specs []Spec, o Options) []provision.Check {
	host := h.String()
	cfg := h.SSH()
	cfg.Identity, cfg.KnownHosts, cfg.LogDir, cfg.Log = o.Identity, o.KnownHosts, o.LogDir, o.Log
	cfg.DialTimeout, cfg.CommandTimeout = doctorTimeout, doctorTimeout
	c, err := sshx.Dial(ctx, cfg)
	if err != nil {
		fix := "check that the host is up and its sshd listens on " + cfg.Addr()
		var hk *sshx.HostKeyError
		switch {
		case errors.As(err, &hk):
			fix = "check the key's fingerprint with the host's owner, then add the line above to " + hk.KnownHosts + " (or give another file with --ssh-known-hosts)"
		case strings.Contains(err.Error(), "refused every key"):
			fix = "add your public key to " + h.User + "'s authorized_keys there, or give the key it has with --ssh-identity"
		}
		return []provision.Check{{Host: host, Name: CheckSSH, Detail: err.Error(), Fix: fix}}
	}
	defer c.Close()
	known := cfg.KnownHosts
	if known == "" {
		known = "~/.ssh/known_hosts"
	}
	out := []provision.Check{{Host: host, Name: CheckSSH, OK: true, Detail: "logged in as " + h.User + "; the host key is the one " + known + " lists"}}
	add := func(ch provision.Check) { ch.Host = host; out = append(out, ch) }

	if sys, err := firstLine(ctx, c, "uname", "-srm"); err != nil {
		add(provision.Check{Name: CheckLinux, Detail: err.Error(), Fix: "the stand-in needs a Linux host"})
	} else {
		add(provision.Check{Name: CheckLinux, OK: strings.HasPrefix(sys, "Linux "), Detail: sys, Fix: "the stand-in needs a Linux host"})
	}
	if uid, err := firstLine(ctx, c, "id", "-u"); err != nil {
		add(provision.Check{Name: CheckRoot, Detail: err.Error(), Fix: "log in as root: local@ssh://root@" + hostPort(h)})
	} else {
		add(provision.Check{Name: CheckRoot, OK: uid == "0", Detail: "logged in as uid " + uid, Fix: "log in as root: local@ssh://root@" + hostPort(h) + " (the stand-in makes namespaces there)"})
	}
	if v, err := firstLine(ctx, c, "sha256sum", "--version"); err != nil {
		add(provision.Check{Name: CheckSHA256Sum, Detail: err.Error(), Fix: "install coreutils there"})
	} else {
		add(provision.Check{Name: CheckSHA256Sum, OK: true, Detail: v})
	}
	for _, s := range specs {
		if s.Kind != "local" {
			continue
		}
		if _, err := c.Exec(ctx, sshx.Command{Name: "fuse", Argv: []string{"test", "-c", "/dev/fuse"}}); err != nil {
			add(provision.Check{Name: CheckFUSE, Detail: "no /dev/fuse: " + err.Error(), Fix: "load the fuse module there (modprobe fuse): the Sandboxes' LayerFS needs it"})
		} else {
			add(provision.Check{Name: CheckFUSE, OK: true, Detail: "/dev/fuse is there"})
		}
		break
	}
	for _, s := range specs {
		if s.Kind != "docker" {
			continue
		}
		if v, err := firstLine(ctx, c, "docker", "version", "--format", "{{.Server.Version}}"); err != nil {
			add(provision.Check{Name: CheckDockerd, Detail: err.Error(),
				Fix: "install Docker there and start it, and add " + h.User + " to the docker group (or log in as root)"})
		} else {
			add(provision.Check{Name: CheckDockerd, OK: true, Detail: "dockerd " + v})
		}
		break
	}
	return out
}

// firstLine runs argv on c and returns the first line of what it printed.
func firstLine(ctx context.Context, c *sshx.Client, argv ...string) (string, error) {
	b, err := c.Run(ctx, argv...)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line, nil
}

// hostPort is the host part of a spec: host[:port], the port only when
// it is not 22.
func hostPort(h *Host) string {
	s := h.String()
	s = s[strings.Index(s, "@")+1:]
	return strings.TrimSuffix(s, fmt.Sprintf(":%d", sshx.DefaultPort))
}
