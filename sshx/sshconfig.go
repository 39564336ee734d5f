package sshx

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// SystemSSHConfig is OpenSSH's system-wide client configuration, read
// after the user's (~/.ssh/config).
const SystemSSHConfig = "/etc/ssh/ssh_config"

// maxJumps bounds a ProxyJump chain, hops of hops included: a
// configuration whose jump hosts jump through each other ends there.
const maxJumps = 8

// SSHConfigFiles are the ssh_config files OpenSSH's client reads, in its
// order (the first value a key gets is the one it keeps): ~/.ssh/config,
// then SystemSSHConfig.
func SSHConfigFiles() []string {
	var files []string
	if home, err := os.UserHomeDir(); err == nil {
		files = append(files, filepath.Join(home, ".ssh", "config"))
	}
	return append(files, SystemSSHConfig)
}

// sshConfig is the ssh_config files, parsed.
type sshConfig struct {
	files []string
	cfgs  []*ssh_config.Config
}

// loadSSHConfig parses files; a file that is not there is skipped, one
// that does not parse is an error naming it.
func loadSSHConfig(files []string) (*sshConfig, error) {
	s := &sshConfig{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the ssh configuration %s: %w", f, err)
		}
		c, err := ssh_config.DecodeBytes(b)
		if err != nil {
			return nil, fmt.Errorf("reading the ssh configuration %s: %w", f, err)
		}
		s.files, s.cfgs = append(s.files, f), append(s.cfgs, c)
	}
	return s, nil
}

// get is key's first value for alias, as OpenSSH takes it.
func (s *sshConfig) get(alias, key string) (string, error) {
	for i, c := range s.cfgs {
		v, err := c.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("%s: %s for %s: %w", s.files[i], key, alias, err)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

// getAll is every value key has for alias, in order (IdentityFile
// accumulates).
func (s *sshConfig) getAll(alias, key string) ([]string, error) {
	var out []string
	for i, c := range s.cfgs {
		vs, err := c.GetAll(alias, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %s for %s: %w", s.files[i], key, alias, err)
		}
		out = append(out, vs...)
	}
	return out, nil
}

// FromSSHConfig fills what cfg leaves empty from the user's ssh_config
// (SSHConfigFiles) for the host cfg.Alias (else cfg.Host), as OpenSSH's
// client reads it: HostName (Host), Port, User, IdentityFile
// (IdentityFiles, when cfg.Identity is empty), UserKnownHostsFile
// (KnownHosts: the first of its files that exists, else the first) and
// ProxyJump (Jump: its hops, each looked up in ssh_config in turn). What
// cfg sets wins: the spec's user and port, --ssh-identity and
// --ssh-known-hosts. As with OpenSSH's -J, those flags are the
// destination's; jump hosts take theirs from ssh_config. Dial calls it;
// calling it again changes nothing.
func FromSSHConfig(cfg Config) (Config, error) {
	sc, err := loadSSHConfig(SSHConfigFiles())
	if err != nil {
		return cfg, err
	}
	return sc.apply(cfg, 0)
}

func (sc *sshConfig) apply(cfg Config, depth int) (Config, error) {
	alias := cfg.Alias
	if alias == "" {
		alias = cfg.Host
	}
	if alias == "" {
		return cfg, nil
	}
	var err error
	get := func(key string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = sc.get(alias, key)
		return v
	}
	hostName, port, usr := get("HostName"), get("Port"), get("User")
	knownHosts, jump := get("UserKnownHostsFile"), get("ProxyJump")
	var identities []string
	if err == nil {
		identities, err = sc.getAll(alias, "IdentityFile")
	}
	if err != nil {
		return cfg, err
	}
	if cfg.User == "" {
		cfg.User = usr
	}
	tokens := func(s string) string { return expandTokens(s, alias, cfg) }
	if cfg.Host == "" {
		cfg.Host = alias
		if hostName != "" {
			cfg.Host = tokens(hostName)
		}
	}
	if cfg.Port == 0 && port != "" {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return cfg, fmt.Errorf("ssh configuration for %s: Port %q is not a number from 1 to 65535", alias, port)
		}
		cfg.Port = n
	}
	if cfg.Identity == "" && len(cfg.IdentityFiles) == 0 {
		for _, f := range identities {
			cfg.IdentityFiles = append(cfg.IdentityFiles, expandPath(tokens(f)))
		}
	}
	if cfg.KnownHosts == "" && knownHosts != "" && !strings.EqualFold(knownHosts, "none") {
		files := strings.Fields(knownHosts)
		cfg.KnownHosts = expandPath(tokens(files[0]))
		for _, f := range files {
			if p := expandPath(tokens(f)); fileExists(p) {
				cfg.KnownHosts = p
				break
			}
		}
	}
	if cfg.Jump == nil && jump != "" && !strings.EqualFold(jump, "none") {
		if depth >= maxJumps {
			return cfg, fmt.Errorf("ssh configuration for %s: ProxyJump goes through more than %d hosts (a loop?)", alias, maxJumps)
		}
		var prev *Config
		for _, hop := range strings.Split(jump, ",") {
			h, err := parseJump(strings.TrimSpace(hop))
			if err != nil {
				return cfg, fmt.Errorf("ssh configuration for %s: ProxyJump %q: %w", alias, jump, err)
			}
			h.Jump, h.Log, h.DialTimeout = prev, cfg.Log, cfg.DialTimeout
			resolved, err := sc.apply(h, depth+1)
			if err != nil {
				return cfg, err
			}
			prev = &resolved
		}
		cfg.Jump = prev
	}
	if cfg.Alias == "" && alias != cfg.Host {
		cfg.Alias = alias
	}
	return cfg, nil
}

// parseJump parses one ProxyJump hop: [USER@]HOST[:PORT], or
// ssh://[USER@]HOST[:PORT]. Its HOST is an alias, looked up in turn.
func parseJump(s string) (Config, error) {
	if s == "" {
		return Config{}, errors.New("an empty hop")
	}
	if !strings.HasPrefix(s, "ssh://") {
		s = "ssh://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, err
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Hostname() == "" {
		return Config{}, fmt.Errorf("%q is not [USER@]HOST[:PORT]", s)
	}
	c := Config{Alias: u.Hostname()}
	if u.User != nil {
		c.User = u.User.Username()
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Config{}, fmt.Errorf("the port %q is not a number from 1 to 65535", p)
		}
		c.Port = n
	}
	return c, nil
}

// expandTokens expands the ssh_config tokens sealbench knows in a
// HostName, IdentityFile or UserKnownHostsFile value: %h (the host name),
// %n (the alias), %p (the port), %r (the remote user), %u and %d (the
// local user and home directory), %% ('%').
func expandTokens(s, alias string, cfg Config) string {
	if !strings.Contains(s, "%") {
		return s
	}
	host := cfg.Host
	if host == "" {
		host = alias
	}
	port := cfg.Port
	if port == 0 {
		port = DefaultPort
	}
	local, home := "", ""
	if u, err := user.Current(); err == nil {
		local = u.Username
	}
	if h, err := os.UserHomeDir(); err == nil {
		home = h
	}
	return strings.NewReplacer("%%", "%", "%h", host, "%n", alias, "%p", strconv.Itoa(port), "%r", cfg.User, "%u", local, "%d", home).Replace(s)
}

// expandPath expands a leading ~/ to the home directory.
func expandPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
