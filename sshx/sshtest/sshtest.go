// Package sshtest runs the fake remote hosts the tests use: Debian's real
// OpenSSH sshd, one per loopback address (127.0.0.2, 127.0.0.3, ...), each
// with its own generated host key, client key, authorized_keys and
// known_hosts in the test's temporary directory. Nothing in ~/.ssh is read
// or written, and the client it configures uses no agent.
//
// sshd runs as root (it must, to log a user in), so Start skips, with the
// reason, unless the test runs as root and /usr/sbin/sshd is installed
// (Debian's openssh-server; `make deps` installs it).
package sshtest

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/sshx"
)

// SSHD is where Debian's openssh-server puts the daemon.
const SSHD = "/usr/sbin/sshd"

// Host is one fake host: an sshd listening on Addr:Port.
type Host struct {
	Addr string // the loopback address, 127.0.0.N
	Port int
	Dir  string // its keys, configuration and log
	User string // who the client logs in as: the test's own user

	HostKey          ssh.PublicKey
	ClientKey        string // the client's private key file
	KnownHosts       string // a known_hosts listing HostKey for Addr:Port
	ConfigFile       string
	LogFile          string
	clientPub        ssh.PublicKey
	cmd              *exec.Cmd
	exited           chan struct{}
	t                testing.TB
	stoppedOnPurpose bool
}

// Need skips the test, with the reason, unless a fake host can run here.
func Need(t testing.TB) {
	t.Helper()
	testenv.NeedRoot(t)
	if _, err := os.Stat(SSHD); err != nil {
		testenv.Skip(t, "needs OpenSSH's sshd (apt-get install openssh-server, or `make deps`): %v", err)
	}
}

// Option changes a fake host's sshd configuration.
type Option func(*settings)

type settings struct {
	tcpForwarding string
	env           []string
	authorize     []*Host
}

// NoForwarding configures the host's sshd with AllowTcpForwarding no,
// which OpenSSH applies to unix sockets too: a host that forwards
// nothing, reached through commands' stdin and stdout instead.
func NoForwarding() Option { return func(s *settings) { s.tcpForwarding = "no" } }

// SetEnv sets an environment variable in every session on the host
// (sshd's SetEnv): DOCKER_HOST, naming the host's own dockerd, say.
func SetEnv(name, value string) Option {
	return func(s *settings) { s.env = append(s.env, name+"="+value) }
}

// Authorize lets other's client key log in too, so that one
// --ssh-identity reaches several fake hosts, as one user's key reaches
// their machines.
func Authorize(other *Host) Option {
	return func(s *settings) { s.authorize = append(s.authorize, other) }
}

// Start runs an sshd on addr (a loopback address such as 127.0.0.2) and a
// free port, and stops it when the test ends.
func Start(t testing.TB, addr string, opts ...Option) *Host {
	t.Helper()
	set := settings{tcpForwarding: "local"}
	for _, o := range opts {
		o(&set)
	}
	Need(t)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := &Host{Addr: addr, Dir: dir, User: u.Username, t: t,
		ClientKey:  filepath.Join(dir, "client_ed25519"),
		KnownHosts: filepath.Join(dir, "known_hosts"),
		ConfigFile: filepath.Join(dir, "sshd_config"),
		LogFile:    filepath.Join(dir, "sshd.log"),
	}
	hostPub := writeKey(t, filepath.Join(dir, "host_ed25519"))
	h.HostKey = hostPub
	clientPub := writeKey(t, h.ClientKey)
	h.clientPub = clientPub
	// sshd reads authorized_keys as the user logging in, who may be
	// another than root (nobody, say): it is public, in a directory all
	// may read (t.TempDir's parent is root's alone).
	pubDir := testenv.ShortTempDir(t, "sshtest-pub-")
	authorized := filepath.Join(pubDir, "authorized_keys")
	if err := os.Chmod(pubDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keys := ssh.MarshalAuthorizedKey(clientPub)
	for _, o := range set.authorize {
		keys = append(keys, ssh.MarshalAuthorizedKey(o.clientPub)...)
	}
	if err := os.WriteFile(authorized, keys, 0o644); err != nil {
		t.Fatal(err)
	}
	// sshd's privilege separation needs its directory (systemd's unit
	// makes it; nothing does here).
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	h.Port = freePort(t, addr)
	if err := os.WriteFile(h.KnownHosts, []byte(h.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`# a fake host for sealbench's tests
ListenAddress %s
HostKey %s
AuthorizedKeysFile %s
PidFile none
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowStreamLocalForwarding yes
# OpenSSH applies AllowTcpForwarding to unix-socket forwarding too.
AllowTcpForwarding %s
X11Forwarding no
PermitTunnel no
PrintMotd no
LogLevel VERBOSE
MaxStartups 64
MaxSessions 64
`, net.JoinHostPort(addr, strconv.Itoa(h.Port)), filepath.Join(dir, "host_ed25519"), authorized, set.tcpForwarding)
	// One SetEnv line: sshd takes the first of a keyword's lines only.
	if len(set.env) > 0 {
		cfg += "SetEnv"
		for _, e := range set.env {
			cfg += ` "` + e + `"`
		}
		cfg += "\n"
	}
	if err := os.WriteFile(h.ConfigFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	t.Cleanup(h.Stop)
	return h
}

// writeKey generates an ed25519 key, writes it to path in OpenSSH's
// format (0600) and returns its public half.
func writeKey(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "sealbench test key")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// freePort finds a port nothing listens on at addr.
func freePort(t testing.TB, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("listening on %s (is it a loopback address this machine has?): %v", addr, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs sshd in the foreground (-D), logging to LogFile (-E), and
// waits until it greets.
func (h *Host) start() {
	h.t.Helper()
	// sshd checks its configuration first: a bad one is the test's bug.
	if out, err := exec.Command(SSHD, "-t", "-f", h.ConfigFile).CombinedOutput(); err != nil {
		h.t.Fatalf("sshd -t -f %s: %v: %s", h.ConfigFile, err, out)
	}
	h.cmd = exec.Command(SSHD, "-D", "-E", h.LogFile, "-f", h.ConfigFile)
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := h.cmd.Start(); err != nil {
		h.t.Fatalf("starting sshd: %v", err)
	}
	h.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(h.cmd, h.exited)
	h.stoppedOnPurpose = false
	addr := net.JoinHostPort(h.Addr, strconv.Itoa(h.Port))
	for i := 0; ; i++ {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.HasPrefix(line, "SSH-2.0-") {
				return
			}
		}
		select {
		case <-h.exited:
			h.t.Fatalf("sshd on %s exited at start:\n%s", addr, h.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if i > 400 {
			h.t.Fatalf("sshd on %s does not greet:\n%s", addr, h.Log())
		}
	}
}

// KnownHostsLine is the known_hosts line of the host's key.
func (h *Host) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)))}, h.HostKey)
}

// Config is the client configuration that reaches the host: its own
// identity and known_hosts, never ~/.ssh or an agent.
func (h *Host) Config() sshx.Config {
	return sshx.Config{User: h.User, Host: h.Addr, Port: h.Port, Identity: h.ClientKey, KnownHosts: h.KnownHosts}
}

// Log is what sshd logged.
func (h *Host) Log() string {
	b, _ := os.ReadFile(h.LogFile)
	return string(b)
}

// Pid is the listening sshd's pid.
func (h *Host) Pid() int { return h.cmd.Process.Pid }

// Sessions lists the pids of every process the listening sshd spawned,
// to any depth: the per-connection sshd processes and the commands they
// run (each of which sshd puts in a session of its own).
func (h *Host) Sessions() []int { return Descendants(h.Pid()) }

// Stop kills the listening sshd and every process it spawned: the host
// is cut off, as a host that drops off the network is. Stopping a
// stopped host does nothing.
func (h *Host) Stop() {
	if h.cmd == nil || h.stoppedOnPurpose {
		return
	}
	h.stoppedOnPurpose = true
	pids := append([]int{h.Pid()}, h.Sessions()...)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-h.exited
}

// Restart starts the host again after Stop, on the same address, port
// and keys.
func (h *Host) Restart() {
	h.t.Helper()
	h.Stop()
	h.start()
}

// Descendants lists the pids of pid's children, their children, and so
// on, from /proc.
func Descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// hold anything: state, then the parent's pid.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
