package sshx

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError is a host key refused: one known_hosts does not list for
// the host (Unknown), or one other than the key it lists (changed).
type HostKeyError struct {
	Host       string // ssh://user@host:port
	KnownHosts string // the file checked
	Key        ssh.PublicKey
	// Known are the keys the file lists for the host; none when Unknown.
	Known   []knownhosts.KnownKey
	Unknown bool
	// Line is the known_hosts line for the key the host offered: what to
	// add once the key is checked out of band.
	Line string
}

func (e *HostKeyError) Error() string {
	offered := e.Key.Type() + " " + ssh.FingerprintSHA256(e.Key)
	if e.Unknown {
		return fmt.Sprintf("the host key of %s is not in %s: it offered %s; check that fingerprint with the host's owner (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub there), then add this line to %s:\n%s",
			e.Host, e.KnownHosts, offered, e.KnownHosts, e.Line)
	}
	var known []string
	for _, k := range e.Known {
		known = append(known, fmt.Sprintf("%s:%d (%s %s)", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
	}
	return fmt.Sprintf("the host key of %s HAS CHANGED: it offered %s, and %s lists %s; someone may be intercepting the connection, or the host was reinstalled: only once you know which, replace that line with:\n%s",
		e.Host, offered, e.KnownHosts, strings.Join(known, ", "), e.Line)
}

// defaultKnownHosts is the user's ~/.ssh/known_hosts.
func defaultKnownHosts() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding ~/.ssh/known_hosts: %w (give --ssh-known-hosts)", err)
	}
	return filepath.Join(home, ".ssh", "known_hosts"), nil
}

// hostKeyCheck returns the callback that checks the host's key against
// cfg's known_hosts, and the key algorithms to ask the host for: those
// of the keys the file lists for it, so that a host with several keys
// offers one the file can vouch for rather than look changed.
func hostKeyCheck(cfg *Config) (ssh.HostKeyCallback, []string, error) {
	file := cfg.KnownHosts
	if file == "" {
		var err error
		if file, err = defaultKnownHosts(); err != nil {
			return nil, nil, err
		}
	}
	var check ssh.HostKeyCallback
	switch _, err := os.Stat(file); {
	case errors.Is(err, fs.ErrNotExist):
		// No file lists no host: every key is unknown, and the error says
		// which line the file should start with.
		check = func(string, net.Addr, ssh.PublicKey) error { return &knownhosts.KeyError{} }
	case err != nil:
		return nil, nil, fmt.Errorf("reading known hosts: %w", err)
	default:
		if check, err = knownhosts.New(file); err != nil {
			return nil, nil, fmt.Errorf("reading known hosts %s: %w", file, err)
		}
	}
	host := cfg.String()
	addr := cfg.Addr()
	cb := func(_ string, remote net.Addr, key ssh.PublicKey) error {
		err := check(addr, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			return &HostKeyError{Host: host, KnownHosts: file, Key: key, Known: ke.Want, Unknown: len(ke.Want) == 0,
				Line: knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)}
		}
		var re *knownhosts.RevokedError
		if errors.As(err, &re) {
			return fmt.Errorf("the host key of %s (%s) is revoked in %s", host, ssh.FingerprintSHA256(key), re.Revoked.String())
		}
		return err
	}
	return cb, knownAlgorithms(check, addr), nil
}

// knownAlgorithms lists the host key algorithms of the keys check knows
// for addr, by asking it about a key it cannot know.
func knownAlgorithms(check ssh.HostKeyCallback, addr string) []string {
	probe, err := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	if err != nil {
		return nil
	}
	tcpAddr := &net.TCPAddr{IP: net.IPv4zero}
	var ke *knownhosts.KeyError
	if !errors.As(check(addr, tcpAddr, probe), &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			algos = append(algos, a)
		}
	}
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			// An RSA key signs with SHA-2 first; ssh-rsa (SHA-1) last.
			add(ssh.KeyAlgoRSASHA512)
			add(ssh.KeyAlgoRSASHA256)
			add(ssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}
