// Package remote is where targets on other hosts, reached over SSH
// (sshx), come together: the target specs that name them,
// `[NAME=]KIND[:PARAM][@ssh://USER@HOST[:PORT]]`, the doctor of a host,
// docker@ssh and local@ssh, and the verified bundle's files installed and
// checked on a host (HostBundle: the stand-in, and the runner a host's
// targets are sampled by; see orchestrate/hostrun.go and
// docs/design/remote-hosts.md).
package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx"
)

// Spec is one --target: a target kind, on this host or on a remote one.
type Spec struct {
	// Name is what samples, pins and the report call the target: NAME
	// when given, otherwise the kind, and for a remote host the kind and
	// the host (docker-gpu1, local-10-0-0-7-2222).
	Name string
	// Kind is the registered target that runs there: local, docker, ...
	Kind string
	// Param is what follows the kind after a ':', for a kind that takes
	// one (kubernetes:RUNTIMECLASS); empty when none is given.
	Param string
	// Host is the remote host; nil for this one.
	Host *Host
	// Node is the bare name after an '@', which the kind's registration
	// says the meaning of (provision.Registration.At): the Kubernetes
	// node a kubernetes target puts its Sandboxes on (kubernetes@NODE;
	// targets on different nodes sample in parallel, as remote hosts do),
	// or the docker CLI context of a docker target (docker@CONTEXT).
	// Empty when the spec names none.
	Node string
}

// Host is a remote host, as a spec names it.
type Host struct {
	User string // empty until Resolve when the spec gives none
	Host string // a name or an address; an IPv6 address without brackets
	Port int    // 0 until Resolve when the spec gives none
	// Alias is the host as the spec wrote it (an alias in ~/.ssh/config,
	// or a name): what ssh_config is read for, by Resolve and by every
	// connection to the host (its IdentityFile, UserKnownHostsFile,
	// ProxyJump).
	Alias string
}

// String is the host's canonical form, the port always written:
// ssh://user@host:port. The ledger records it; it is complete once
// Resolve has filled in what the spec left to ssh_config.
func (h *Host) String() string {
	port := h.Port
	if port == 0 {
		port = sshx.DefaultPort
	}
	user := ""
	if h.User != "" {
		user = h.User + "@"
	}
	return "ssh://" + user + net.JoinHostPort(h.Host, strconv.Itoa(port))
}

// SSH is the sshx configuration that reaches the host; the caller adds
// the identity, known_hosts and the rest.
func (h *Host) SSH() sshx.Config {
	return sshx.Config{User: h.User, Host: h.Host, Port: h.Port, Alias: h.Alias}
}

// Resolve fills in what the spec left out from the user's ssh_config for
// its alias, as OpenSSH does (sshx.FromSSHConfig): the HostName it gives
// becomes Host, and its Port and User the port and user where the spec
// gave none (the default port otherwise). A host with no user from
// either is refused: sealbench does not guess who logs in.
func (h *Host) Resolve() error {
	cfg, err := sshx.FromSSHConfig(sshx.Config{User: h.User, Port: h.Port, Alias: h.Alias})
	if err != nil {
		return err
	}
	if cfg.User == "" {
		return fmt.Errorf("no user for %s: write ssh://USER@%s, or give the host a User in ~/.ssh/config (sealbench does not guess who logs in; the ledger records it)", h.Alias, h.Alias)
	}
	if !userRE.MatchString(cfg.User) {
		return fmt.Errorf("the user %q (from the ssh configuration of %s) is not a login name", cfg.User, h.Alias)
	}
	host := strings.ToLower(cfg.Host)
	if ip := net.ParseIP(host); ip == nil && (!hostRE.MatchString(host) || len(host) > 253) {
		return fmt.Errorf("the HostName %q (from the ssh configuration of %s) is not a host name or an address", cfg.Host, h.Alias)
	}
	h.User, h.Host, h.Port = cfg.User, host, cfg.Port
	if h.Port == 0 {
		h.Port = sshx.DefaultPort
	}
	return nil
}

// Options say how hosts are reached: the --ssh-identity and
// --ssh-known-hosts files (empty: the agent and the default keys;
// ~/.ssh/known_hosts), and where each command's output is kept.
type Options struct {
	Identity   string
	KnownHosts string
	LogDir     string
	Log        func(string, ...any)
}

// Dial connects to h as o says.
func (h *Host) Dial(ctx context.Context, o Options) (*sshx.Client, error) {
	cfg := h.SSH()
	cfg.Identity, cfg.KnownHosts, cfg.LogDir, cfg.Log = o.Identity, o.KnownHosts, o.LogDir, o.Log
	return sshx.Dial(ctx, cfg)
}

// String is the spec in canonical form: NAME=KIND@ssh://user@host:port,
// with NAME= left out when it is the default.
func (s Spec) String() string {
	kind := s.Kind
	if s.Param != "" {
		kind += ":" + s.Param
	}
	if s.Node != "" {
		out := kind + "@" + s.Node
		if s.Name != defaultName(s.Kind, s.Node, 0) {
			out = s.Name + "=" + out
		}
		return out
	}
	if s.Host == nil {
		if s.Name != s.Kind {
			return s.Name + "=" + kind
		}
		return kind
	}
	out := kind + "@" + s.Host.String()
	if s.Name != defaultName(s.Kind, s.Host.Host, s.Host.Port) {
		out = s.Name + "=" + out
	}
	return out
}

var (
	kindRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// paramRE is a kind's parameter: a DNS subdomain, as Kubernetes
	// names a RuntimeClass.
	paramRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)
	// userRE is a login name as the tools that make users accept it, and
	// never one that an ssh client could read as an option.
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$`)
	// atNameRE is a bare name after an '@': a Kubernetes node's name (a
	// DNS subdomain) or a docker context's (docker/cli's rule: a letter
	// or digit, then letters, digits, '_', '.', '+' and '-').
	atNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,252}$`)
	// hostRE is a DNS name (labels of letters, digits and '-').
	hostRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
)

const specForm = "KIND[:PARAM], KIND@ssh://USER@HOST[:PORT], NAME=KIND@ssh://USER@HOST[:PORT], kubernetes[:RUNTIMECLASS]@NODE or docker@CONTEXT"

// ParseSpec parses one target spec. It checks the form only: whether
// KIND is registered, and can run on a remote host, is the caller's.
func ParseSpec(s string) (Spec, error) {
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("target %q: %s (the form is %s)", s, fmt.Sprintf(format, args...), specForm)
	}
	if s == "" {
		return bad("empty")
	}
	if strings.ContainsAny(s, " \t\n\x00,") {
		return bad("contains a space, a comma or a control character")
	}
	var spec Spec
	rest := s
	// NAME= comes before anything with an '@' or a ':' in it.
	if name, r, ok := strings.Cut(s, "="); ok && !strings.ContainsAny(name, "@:/") {
		if !manifests.ValidTargetName(name) {
			return bad("the name %q is not a target name (a lowercase letter, then lowercase letters, digits and '-'; at most 63)", name)
		}
		spec.Name, rest = name, r
	}
	kind, where, remote := strings.Cut(rest, "@")
	kind, param, hasParam := strings.Cut(kind, ":")
	if !kindRE.MatchString(kind) {
		return bad("%q is not a target kind", kind)
	}
	if hasParam && !paramRE.MatchString(param) {
		return bad("%q after %s: is not a parameter (lowercase letters, digits, '-' and '.', as a Kubernetes name)", param, kind)
	}
	spec.Kind, spec.Param = kind, param
	if !remote {
		if spec.Name == "" {
			spec.Name = kind
		}
		return spec, nil
	}
	if !strings.Contains(where, "://") && atNameRE.MatchString(where) {
		// A bare name: a Kubernetes node, a docker context (whether the
		// kind takes one is the caller's to say).
		spec.Node = where
		if spec.Name == "" {
			spec.Name = defaultName(kind, where, 0)
			if !manifests.ValidTargetName(spec.Name) {
				return bad("the name made from it, %q, is not a target name: give one (NAME=%s)", spec.Name, rest)
			}
		}
		return spec, nil
	}
	h, err := parseHost(where)
	if err != nil {
		return bad("%v", err)
	}
	spec.Host = h
	if spec.Name == "" {
		spec.Name = defaultName(kind, h.Host, h.Port)
		if !manifests.ValidTargetName(spec.Name) {
			return bad("the name made from it, %q, is not a target name: give one (NAME=%s)", spec.Name, rest)
		}
	}
	return spec, nil
}

// parseHost parses ssh://[USER@]HOST[:PORT]. Without a USER or a PORT,
// they are left for Resolve to take from ssh_config.
func parseHost(s string) (*Host, error) {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("after '@' comes a host, ssh://USER@HOST[:PORT], or a name (a Kubernetes node, a docker context), not %q", s)
	}
	if scheme != "ssh" {
		return nil, fmt.Errorf("hosts are reached over ssh:// only, not %s://", scheme)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("the host %q: %v", s, err)
	}
	if u.User != nil && u.User.Username() == "" {
		return nil, fmt.Errorf("no user before the '@': write ssh://USER@%s, or ssh://%s with a User for it in ~/.ssh/config", u.Host, u.Host)
	}
	if _, has := u.User.Password(); has {
		return nil, errors.New("a password in the host: sealbench logs in with keys only (your agent, or --ssh-identity) and never sends a password")
	}
	user := u.User.Username()
	if user != "" && !userRE.MatchString(user) {
		return nil, fmt.Errorf("the user %q is not a login name (letters, digits, '.', '_', '-'; not starting with '-' or '.'; at most 32)", user)
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.HasSuffix(s, "#") {
		return nil, errors.New("a path, query or fragment after the host: a host is ssh://USER@HOST[:PORT] and nothing more")
	}
	host := u.Hostname()
	switch ip := net.ParseIP(host); {
	case host == "":
		return nil, errors.New("no host after the user")
	case ip != nil:
		if ip.To4() == nil && !strings.HasPrefix(u.Host, "[") {
			return nil, errors.New("an IPv6 address goes in brackets: ssh://USER@[ADDRESS]:PORT")
		}
		if ip.IsUnspecified() || ip.IsMulticast() {
			return nil, fmt.Errorf("%s is not the address of one host", host)
		}
	case !hostRE.MatchString(host) || len(host) > 253:
		return nil, fmt.Errorf("%q is not a host name (letters, digits, '-' and dots) or an address", host)
	}
	port := 0 // ssh_config's, else the default: Resolve
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return nil, fmt.Errorf("the port %q is not a number from 1 to 65535", p)
		}
		port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, errors.New("a ':' with no port after it")
	}
	// OpenSSH looks the host up in ssh_config lowercased, as it is here.
	host = strings.ToLower(host)
	return &Host{User: user, Host: host, Port: port, Alias: host}, nil
}

// defaultName is a remote target's name when the spec gives none: the
// kind and the host (or node), in the alphabet of target names, and the
// port when it is not 22 (0 for a node: none).
func defaultName(kind, host string, port int) string {
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte('-')
	dash := true
	for _, r := range strings.ToLower(host) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimRight(b.String(), "-")
	if port != 0 && port != sshx.DefaultPort {
		name += "-" + strconv.Itoa(port)
	}
	return name
}

// ParseSpecs parses a --target list, already split at its commas, and
// refuses two specs that give one name (naming both) or name one target
// twice.
func ParseSpecs(list []string) ([]Spec, error) {
	var specs []Spec
	var errs []error
	byName := map[string]string{}
	for _, s := range list {
		spec, err := ParseSpec(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := byName[spec.Name]; dup {
			if other == s {
				errs = append(errs, fmt.Errorf("target %q named twice", s))
			} else {
				errs = append(errs, fmt.Errorf("targets %q and %q are both named %s: name one (NAME=%s)", other, s, spec.Name, s))
			}
			continue
		}
		byName[spec.Name] = s
		specs = append(specs, spec)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return specs, nil
}
