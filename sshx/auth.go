package sshx

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// defaultKeys are the key files OpenSSH tries when none is given, in its
// order, under ~/.ssh.
var defaultKeys = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

// authMethods returns the one way sealbench logs in: public keys. With
// cfg.Identity, that key alone; otherwise the agent's keys, then the key
// files ssh_config names (cfg.IdentityFiles) or, where it names none,
// the default ones, each that needs no passphrase (an encrypted one is
// the agent's to offer). The returned func closes the agent's connection.
func authMethods(cfg *Config) ([]ssh.AuthMethod, func(), error) {
	if cfg.Identity != "" {
		s, err := loadKey(cfg.Identity)
		if err != nil {
			return nil, func() {}, err
		}
		return []ssh.AuthMethod{ssh.PublicKeys(s)}, func() {}, nil
	}
	var methods []ssh.AuthMethod
	closeAgent := func() {}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			cfg.Log("ssh: the agent at SSH_AUTH_SOCK=%s does not answer (%v); trying the default keys", sock, err)
		} else {
			closeAgent = func() { conn.Close() }
			methods = append(methods, ssh.PublicKeysCallback(agent.NewClient(conn).Signers))
		}
	}
	var files []ssh.Signer
	for _, p := range keyFiles(cfg) {
		s, err := loadKey(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			cfg.Log("ssh: not using %v", err)
		default:
			files = append(files, s)
		}
	}
	if len(files) > 0 {
		methods = append(methods, ssh.PublicKeys(files...))
	}
	if len(methods) == 0 {
		closeAgent()
		return nil, func() {}, fmt.Errorf("no SSH key to log in to %s with: start an agent holding your key (ssh-add), name one with IdentityFile in ~/.ssh/config, or give --ssh-identity FILE", cfg.String())
	}
	return methods, closeAgent, nil
}

// loadKey reads a private key file that needs no passphrase: sealbench
// never asks for one.
func loadKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the SSH key %s: %w", path, err)
	}
	s, err := ssh.ParsePrivateKey(b)
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		return nil, fmt.Errorf("the SSH key %s is encrypted, and sealbench asks for no passphrase: add it to your agent (ssh-add %s) and use the agent", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the SSH key %s: %w", path, err)
	}
	return s, nil
}

// keyFiles are the key files offered after the agent's: ssh_config's
// IdentityFile ones, or the default ones.
func keyFiles(cfg *Config) []string {
	if len(cfg.IdentityFiles) > 0 {
		return cfg.IdentityFiles
	}
	var out []string
	if home, err := os.UserHomeDir(); err == nil {
		for _, name := range defaultKeys {
			out = append(out, filepath.Join(home, ".ssh", name))
		}
	}
	return out
}

// keySource says, for a message, which keys were offered.
func keySource(cfg *Config) string {
	if cfg.Identity != "" {
		return "the key in " + cfg.Identity
	}
	if len(cfg.IdentityFiles) > 0 {
		return "the agent's keys and " + strings.Join(cfg.IdentityFiles, ", ") + " (IdentityFile in your ssh configuration)"
	}
	return "the agent's keys and ~/.ssh/id_*"
}
