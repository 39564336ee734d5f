package orchestrate

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
)

// SSH says how remote hosts are reached: --ssh-identity and
// --ssh-known-hosts, empty for the defaults (the agent and the default
// keys; ~/.ssh/known_hosts).
type SSH struct {
	Identity   string
	KnownHosts string
}

// Options is the connection options of package remote.
func (s SSH) options() remote.Options {
	return remote.Options{Identity: s.Identity, KnownHosts: s.KnownHosts}
}

// provision is how teardown and the audit take it.
func (s SSH) provision() runs.SSHOptions {
	return runs.SSHOptions{Identity: s.Identity, KnownHosts: s.KnownHosts}
}

// ParseTargets parses a --target list (split at its commas) into specs:
// each kind registered, a NAME= only for a target on a remote host (a
// target here is named by its kind), a remote host only for a kind that
// can run there, and no name twice. A remote host is resolved through
// the user's ssh_config (remote.Host.Resolve: an alias's HostName, Port
// and User).
func ParseTargets(list []string) ([]remote.Spec, error) { return parseTargets(list, true) }

// parseTargets is ParseTargets; the doctor passes mustRun false, to say
// whether a target can run on a host rather than refuse to look.
func parseTargets(list []string, mustRun bool) ([]remote.Spec, error) {
	hint := "targets: " + strings.Join(provision.Names(), ", ") + ", each as KIND, KIND:PARAM (kubernetes:RUNTIMECLASS), KIND@ssh://USER@HOST[:PORT], kubernetes@NODE or docker@CONTEXT; `sealbench doctor` says what this host can run"
	specs, err := remote.ParseSpecs(list)
	if err != nil {
		return nil, usagef(hint, "%v", err)
	}
	for _, s := range specs {
		reg, ok := provision.Lookup(s.Kind)
		switch {
		case !ok:
			return nil, usagef(hint, "no target named %q", s.Kind)
		case s.Node != "" && reg.At == "":
			return nil, usagef("a remote host is ssh://USER@HOST[:PORT]: "+s.Kind+"@ssh://root@"+s.Node,
				"target %q: %s takes no name after its '@' (a cluster's node, a docker context); after its '@' comes a host", s.String(), s.Kind)
		case s.Node != "" && isKind(s.Name):
			return nil, usagef("give it another name: NAME="+s.Kind+"@"+s.Node,
				"target %q: its name %s is a target kind's, which names the target on this host", s.String(), s.Name)
		case s.Host == nil && s.Node == "" && s.Name != s.Kind:
			return nil, usagef("write "+s.Kind+" alone, or put the target on a host: "+s.Name+"="+s.Kind+"@ssh://USER@HOST",
				"target %q: a name is given to a target on a remote host only; one on this host is named by its kind", s.String())
		case s.Host != nil && isKind(s.Name):
			return nil, usagef("give it another name: NAME="+s.Kind+"@"+s.Host.String(),
				"target %q: its name %s is a target kind's, which names the target on this host", s.String(), s.Name)
		case s.Host != nil && reg.Remote == nil && mustRun:
			return nil, usagef(remoteHint(), "target %q: %s cannot run on a remote host", s.String(), s.Kind)
		case s.Param != "" && reg.Param == "":
			return nil, usagef(paramHint(), "target %q: %s takes nothing after a ':'", s.String(), s.Kind)
		}
		if s.Host != nil {
			if err := s.Host.Resolve(); err != nil {
				return nil, usagef("a remote host is ssh://USER@HOST[:PORT], or an alias ~/.ssh/config gives a HostName, Port and User", "target %q: %v", s.String(), err)
			}
		}
	}
	return specs, nil
}

// CheckTargets is ParseTargets for the commands that bring targets up
// (run, provision): a target on this host that needs root needs us to be
// root too.
func CheckTargets(list []string) ([]remote.Spec, error) {
	specs, err := ParseTargets(list)
	if err != nil {
		return nil, err
	}
	hint := "targets: " + strings.Join(provision.Names(), ", ") + "; `sealbench doctor` says what this host can run"
	for _, s := range specs {
		if reg, _ := provision.Lookup(s.Kind); s.Host == nil && reg.Root && os.Geteuid() != 0 {
			return nil, usagef("run it as root (sudo); "+hint, "the %s target needs root: the stand-in runs Sandboxes as mount, PID and network namespaces", s.Kind)
		}
	}
	return specs, nil
}

// Names are the specs' target names, for the parts of a run that do not
// reach remote hosts yet.
func Names(specs []remote.Spec) []string {
	var ns []string
	for _, s := range specs {
		ns = append(ns, s.Name)
	}
	return ns
}

func isKind(name string) bool {
	_, ok := provision.Lookup(name)
	return ok
}

func paramHint() string {
	var with []string
	for _, r := range provision.Registered() {
		if r.Param != "" {
			with = append(with, r.Name+":"+r.Param)
		}
	}
	if len(with) == 0 {
		return "no target takes a parameter"
	}
	return "targets that take one: " + strings.Join(with, ", ")
}

func remoteHint() string {
	kinds := provision.RemoteKinds()
	if len(kinds) == 0 {
		return "no target of this sealbench runs on a remote host yet (docs/design/remote-hosts.md says which will); run it here"
	}
	return fmt.Sprintf("targets that run on a remote host: %s", strings.Join(kinds, ", "))
}

// DoctorOptions says what the doctor looks at: Targets (--target, split
// at its commas; empty: every target on this host) and how remote hosts
// are reached.
type DoctorOptions struct {
	Targets []string
	SSH     SSH
}

// Doctor says what this host can run (provision.Doctor) and, for the
// remote hosts Targets name, what each of them can (remote.Doctor). With
// Targets, only those targets are listed; the host's own checks only when
// one of them is on this host.
func Doctor(ctx context.Context, o DoctorOptions) (*provision.DoctorReport, error) {
	if len(o.Targets) == 0 {
		return provision.Doctor(ctx), nil
	}
	specs, err := parseTargets(o.Targets, false)
	if err != nil {
		return nil, err
	}
	r := &provision.DoctorReport{Checks: []provision.Check{}, Targets: []provision.TargetReadiness{}}
	here := map[string]bool{}
	for _, s := range specs {
		if s.Host == nil {
			here[s.Kind] = true
		}
	}
	if len(here) > 0 {
		local := provision.Doctor(ctx)
		r.Checks = local.Checks
		for _, t := range local.Targets {
			if here[t.Target] {
				r.Targets = append(r.Targets, t)
			}
		}
	}
	far := remote.Doctor(ctx, specs, o.SSH.options())
	r.Checks = append(r.Checks, far.Checks...)
	r.Targets = append(r.Targets, far.Targets...)
	return r, nil
}
