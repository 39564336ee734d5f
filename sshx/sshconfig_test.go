package sshx_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// sshHome makes a home directory of the test's own, with config as its
// ~/.ssh/config, and no agent: what sshx reads is that file alone (and
// the system's /etc/ssh/ssh_config, which sets none of these keys).
func sshHome(t *testing.T, config string) string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	return home
}

// TestFromSSHConfig: an alias takes its HostName, Port, User,
// IdentityFile (~ and tokens expanded), UserKnownHostsFile (the first
// that exists) and ProxyJump (each hop looked up in turn) from
// ~/.ssh/config, as OpenSSH's client does; what the Config sets wins;
// a name no Host block matches is itself.
func TestFromSSHConfig(t *testing.T) {
	home := sshHome(t, `
Host bench
    HostName 10.0.0.7
    Port 2222
    User bench
    IdentityFile ~/.ssh/bench_%r
    UserKnownHostsFile ~/.ssh/absent ~/.ssh/kh_%n
    ProxyJump bastion

Host bastion
    HostName 10.0.0.1
    User jump
    IdentityFile ~/.ssh/jump_key

Host two-hops
    HostName 10.0.0.9
    ProxyJump ops@bastion:2200,ssh://10.0.0.5

Host *
    User everyone
`)
	if err := os.WriteFile(filepath.Join(home, ".ssh", "kh_bench"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ssh := filepath.Join(home, ".ssh")
	c, err := sshx.FromSSHConfig(sshx.Config{Alias: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Route() != "ssh://bench@10.0.0.7:2222 via ssh://jump@10.0.0.1:22" ||
		strings.Join(c.IdentityFiles, " ") != filepath.Join(ssh, "bench_bench") || c.KnownHosts != filepath.Join(ssh, "kh_bench") ||
		c.Jump.Alias != "bastion" || strings.Join(c.Jump.IdentityFiles, " ") != filepath.Join(ssh, "jump_key") {
		t.Errorf("bench: %s, %+v (jump %+v)", c.Route(), c, c.Jump)
	}

	// What the Config sets (the spec, the flags) wins.
	c, err = sshx.FromSSHConfig(sshx.Config{Alias: "bench", User: "root", Port: 22, Identity: "/keys/id", KnownHosts: "/keys/kh"})
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "ssh://root@10.0.0.7:22" || c.Identity != "/keys/id" || len(c.IdentityFiles) != 0 || c.KnownHosts != "/keys/kh" {
		t.Errorf("bench with flags: %s, %+v", c.String(), c)
	}

	// Hops in the order given, each resolved; the last is next to the host.
	c, err = sshx.FromSSHConfig(sshx.Config{Alias: "two-hops"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Route() != "ssh://everyone@10.0.0.9:22 via ssh://everyone@10.0.0.5:22 via ssh://ops@10.0.0.1:2200" {
		t.Errorf("two-hops: %s", c.Route())
	}

	c, err = sshx.FromSSHConfig(sshx.Config{Host: "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "ssh://everyone@10.1.2.3:22" || c.Jump != nil || len(c.IdentityFiles) != 0 || c.KnownHosts != "" {
		t.Errorf("a plain address: %s, %+v", c.String(), c)
	}

	sshHome(t, "Host loop\n    ProxyJump loop\n")
	if _, err := sshx.FromSSHConfig(sshx.Config{Alias: "loop"}); err == nil || !strings.Contains(err.Error(), "a loop?") {
		t.Errorf("a ProxyJump through itself: %v", err)
	}
	sshHome(t, "Host bad\n    Port ssh\n")
	if _, err := sshx.FromSSHConfig(sshx.Config{Alias: "bad"}); err == nil || !strings.Contains(err.Error(), "Port") {
		t.Errorf("a Port that is no number: %v", err)
	}
}

// TestDialAnAliasFromSSHConfigAlone: a fake host is reached by its alias
// alone, its address, port, user, key and known_hosts all from
// ~/.ssh/config.
func TestDialAnAliasFromSSHConfigAlone(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	sshHome(t, fmt.Sprintf(`Host bench
    HostName %s
    Port %d
    User %s
    IdentityFile %s
    UserKnownHostsFile %s
`, h.Addr, h.Port, h.User, h.ClientKey, h.KnownHosts))
	c := dial(t, sshx.Config{Alias: "bench"})
	if cfg := c.Config(); cfg.String() != fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port) {
		t.Errorf("reached %s", cfg.String())
	}
	if out, err := c.Exec(context.Background(), sshx.Command{Name: "echo", Argv: []string{"echo", "hello"}}); err != nil || string(out) != "hello\n" {
		t.Errorf("echo over the alias: %q, %v", out, err)
	}
}

// TestDialWithAKeyTheAgentHolds: a host whose key only an ssh agent
// holds (an x/crypto keyring served on a unix socket: SSH_AUTH_SOCK) is
// logged in to with it, and refused without the agent.
func TestDialWithAKeyTheAgentHolds(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	sshHome(t, fmt.Sprintf("Host agented\n    HostName %s\n    Port %d\n    User %s\n    UserKnownHostsFile %s\n", h.Addr, h.Port, h.User, h.KnownHosts))
	b, err := os.ReadFile(h.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: key.(*ed25519.PrivateKey)}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var served atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func() { defer conn.Close(); agent.ServeAgent(keyring, conn) }()
		}
	}()

	// Without the agent: no key at all.
	if c, err := sshx.Dial(context.Background(), sshx.Config{Alias: "agented"}); err == nil {
		c.Close()
		t.Fatal("logged in with no agent and no key")
	}
	t.Setenv("SSH_AUTH_SOCK", sock)
	c := dial(t, sshx.Config{Alias: "agented"})
	if out, err := c.Exec(context.Background(), sshx.Command{Name: "true", Argv: []string{"true"}}); err != nil {
		t.Errorf("true over the agent's key: %q, %v", out, err)
	}
	if served.Load() == 0 {
		t.Error("the agent was never asked")
	}
}

// TestDialThroughAProxyJump: a host is reached through the ProxyJump
// host its alias names (two real sshds), the jump host's own settings
// from its own Host block; through a jump host that forwards nothing the
// same alias cannot be reached, which shows the connection went through
// it.
func TestDialThroughAProxyJump(t *testing.T) {
	dest := sshtest.Start(t, "127.0.0.2")
	jump := sshtest.Start(t, "127.0.0.3")
	closed := sshtest.Start(t, "127.0.0.4", sshtest.NoForwarding())
	block := func(name string, h *sshtest.Host, extra string) string {
		return fmt.Sprintf("Host %s\n    HostName %s\n    Port %d\n    User %s\n    IdentityFile %s\n    UserKnownHostsFile %s\n%s\n",
			name, h.Addr, h.Port, h.User, h.ClientKey, h.KnownHosts, extra)
	}
	sshHome(t, block("inner", dest, "    ProxyJump jumpbox")+block("inner-closed", dest, "    ProxyJump closedbox")+
		block("jumpbox", jump, "")+block("closedbox", closed, ""))
	c := dial(t, sshx.Config{Alias: "inner"})
	if out, err := c.Exec(context.Background(), sshx.Command{Name: "echo", Argv: []string{"echo", "through"}}); err != nil || string(out) != "through\n" {
		t.Errorf("echo through the jump: %q, %v", out, err)
	}
	cfg := c.Config()
	if r := cfg.Route(); !strings.Contains(r, fmt.Sprintf(" via ssh://%s@%s:%d", jump.User, jump.Addr, jump.Port)) {
		t.Errorf("route %s: want it through %s", r, jump.Addr)
	}
	if !strings.Contains(jump.Log(), "Accepted publickey") {
		t.Errorf("the jump host logged no login:\n%s", jump.Log())
	}
	_, err := sshx.Dial(context.Background(), sshx.Config{Alias: "inner-closed"})
	if err == nil || !strings.Contains(err.Error(), "through ssh://") {
		t.Errorf("through a jump host that forwards nothing: %v; want it refused there", err)
	}
	var hk *sshx.HostKeyError
	if errors.As(err, &hk) {
		t.Errorf("a host key refusal, not the jump's: %v", err)
	}
}
