package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx"
)

// HostsFile is the file beside a run's ledger that says how each remote
// host of the run is reached, so that a later `teardown --run ID` and the
// audit reach it the same way without flags.
const HostsFile = "hosts.json"

// hostsFormatVersion is the version of hosts.json.
const hostsFormatVersion = 1

// HostRecord is one remote host of a run: how it is reached (paths,
// never key material), and whether teardown has finished there.
type HostRecord struct {
	Host       string `json:"host"`                 // ssh://user@host:port
	KnownHosts string `json:"knownHosts,omitempty"` // empty: ~/.ssh/known_hosts
	Identity   string `json:"identity,omitempty"`   // empty: the agent and ssh_config's or the default keys
	// Alias is the name the spec gave the host (ssh://ALIAS), which
	// ssh_config is read for (IdentityFile, UserKnownHostsFile,
	// ProxyJump) every time the host is reached; empty: the host's own.
	Alias string `json:"alias,omitempty"`
	// TornDown says a teardown removed every entry of the run on the
	// host: a later teardown does not connect to it again.
	TornDown bool `json:"tornDown,omitempty"`
}

type hostsDoc struct {
	FormatVersion int          `json:"formatVersion"`
	Hosts         []HostRecord `json:"hosts"`
}

// hostsMu serializes the read-modify-write of hosts.json within this
// process (one run records its hosts from one process).
var hostsMu sync.Mutex

// RecordHost records, before the run first connects to it, how the
// run's host h is reached, in runDir's hosts.json (written atomically).
// Recording a host again replaces its record.
func RecordHost(runDir string, h HostRecord) error {
	if err := manifests.ValidateSSHHost(h.Host); err != nil {
		return err
	}
	for _, p := range []string{h.KnownHosts, h.Identity} {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("host %s: %q is not an absolute path", h.Host, p)
		}
	}
	if len(h.Alias) > 253 || strings.ContainsFunc(h.Alias, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '/' }) {
		return fmt.Errorf("host %s: the alias %q is not a host name", h.Host, h.Alias)
	}
	hostsMu.Lock()
	defer hostsMu.Unlock()
	hosts, err := ReadHosts(runDir)
	if err != nil {
		return err
	}
	hosts[h.Host] = h
	return writeHosts(runDir, hosts)
}

// markTornDown records that teardown finished on host.
func markTornDown(runDir, host string) error {
	hostsMu.Lock()
	defer hostsMu.Unlock()
	hosts, err := ReadHosts(runDir)
	if err != nil {
		return err
	}
	h := hosts[host]
	h.Host, h.TornDown = host, true
	hosts[host] = h
	return writeHosts(runDir, hosts)
}

func writeHosts(runDir string, hosts map[string]HostRecord) error {
	doc := hostsDoc{FormatVersion: hostsFormatVersion, Hosts: []HostRecord{}}
	for _, h := range hosts {
		doc.Hosts = append(doc.Hosts, h)
	}
	sort.Slice(doc.Hosts, func(i, j int) bool { return doc.Hosts[i].Host < doc.Hosts[j].Host })
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(runDir, HostsFile), append(b, '\n'), 0o600)
}

// ReadHosts reads runDir's hosts.json, by host; a run without one has no
// remote hosts recorded.
func ReadHosts(runDir string) (map[string]HostRecord, error) {
	out := map[string]HostRecord{}
	b, err := os.ReadFile(filepath.Join(runDir, HostsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var doc hostsDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(runDir, HostsFile), err)
	}
	if doc.FormatVersion != hostsFormatVersion {
		return nil, fmt.Errorf("%s: formatVersion %d, want %d", filepath.Join(runDir, HostsFile), doc.FormatVersion, hostsFormatVersion)
	}
	for _, h := range doc.Hosts {
		if err := manifests.ValidateSSHHost(h.Host); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(runDir, HostsFile), err)
		}
		out[h.Host] = h
	}
	return out, nil
}

// SSHOptions override, for teardown and the audit, how hosts.json says a
// host is reached (--ssh-identity, --ssh-known-hosts); empty fields keep
// what it says.
type SSHOptions struct {
	Identity   string
	KnownHosts string
	// LogDir keeps each remote command's output; empty: not kept.
	LogDir string
}

// sshConfig is how host (canonical) is reached: hosts.json's record,
// with o's overrides.
func sshConfig(host string, rec HostRecord, o SSHOptions) (sshx.Config, error) {
	if err := manifests.ValidateSSHHost(host); err != nil {
		return sshx.Config{}, err
	}
	u, err := url.Parse(host)
	if err != nil {
		return sshx.Config{}, err
	}
	port, _ := strconv.Atoi(u.Port())
	cfg := sshx.Config{User: u.User.Username(), Host: u.Hostname(), Port: port, Alias: rec.Alias, Identity: rec.Identity, KnownHosts: rec.KnownHosts, LogDir: o.LogDir}
	if o.Identity != "" {
		cfg.Identity = o.Identity
	}
	if o.KnownHosts != "" {
		cfg.KnownHosts = o.KnownHosts
	}
	if net.JoinHostPort(cfg.Host, u.Port()) != u.Host {
		return sshx.Config{}, fmt.Errorf("host %q does not parse back to itself", host)
	}
	return cfg, nil
}
