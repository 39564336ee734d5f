package sshx

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// defaultKeys are the key files OpenSSH tries when none is given, in its
// order, under ~/.ssh.
var defaultKeys = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

// authMethods returns the one way sealbench logs in: public keys. With
// cfg.Identity, that key alone; otherwise the agent's keys and then the
// default key files that need no passphrase. The returned func closes
// the agent's connection.
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
	if home, err := os.UserHomeDir(); err == nil {
		for _, name := range defaultKeys {
			p := filepath.Join(home, ".ssh", name)
			s, err := loadKey(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				cfg.Log("ssh: not using %v", err)
			default:
				files = append(files, s)
			}
		}
	}
	if len(files) > 0 {
		methods = append(methods, ssh.PublicKeys(files...))
	}
	if len(methods) == 0 {
		closeAgent()
		return nil, func() {}, fmt.Errorf("no SSH key to log in to %s with: start an agent holding your key (ssh-add), or give --ssh-identity FILE", cfg.String())
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

// keySource says, for a message, which keys were offered.
func keySource(cfg *Config) string {
	if cfg.Identity != "" {
		return "the key in " + cfg.Identity
	}
	return "the agent's keys and ~/.ssh/id_*"
}
