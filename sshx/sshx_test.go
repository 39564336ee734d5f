package sshx_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

func dial(t *testing.T, cfg sshx.Config) *sshx.Client {
	t.Helper()
	c, err := sshx.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestUnknownHostKeyRefusedWithTheLineToAdd(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"empty file": empty, "no file": filepath.Join(t.TempDir(), "absent")} {
		t.Run(name, func(t *testing.T) {
			cfg := h.Config()
			cfg.KnownHosts = file
			c, err := sshx.Dial(context.Background(), cfg)
			if err == nil {
				c.Close()
				t.Fatal("a host whose key is in no known_hosts was accepted")
			}
			var hk *sshx.HostKeyError
			if !errors.As(err, &hk) {
				t.Fatalf("want a *HostKeyError, got %T: %v", err, err)
			}
			if !hk.Unknown || hk.Line != h.KnownHostsLine() {
				t.Errorf("unknown %v, line %q; want unknown and %q", hk.Unknown, hk.Line, h.KnownHostsLine())
			}
			if !strings.Contains(err.Error(), h.KnownHostsLine()) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(h.HostKey)) {
				t.Errorf("the message lacks the line to add or the fingerprint: %v", err)
			}
			// The line it prints is the one that lets it in.
			if err := os.WriteFile(file, []byte(hk.Line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			dial(t, cfg)
		})
	}
}

func TestChangedHostKeyRefused(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	addr := knownhosts.Normalize(net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)))
	if err := os.WriteFile(file, []byte("# another host's key, where this host's was\n"+knownhosts.Line([]string{addr}, other)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := h.Config()
	cfg.KnownHosts = file
	c, err := sshx.Dial(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("a host offering another key than known_hosts lists was accepted")
	}
	var hk *sshx.HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("want a *HostKeyError, got %T: %v", err, err)
	}
	if hk.Unknown || len(hk.Known) != 1 || hk.Known[0].Line != 2 || !bytes.Equal(hk.Known[0].Key.Marshal(), other.Marshal()) {
		t.Errorf("want the changed key of %s:2, got unknown %v, known %v", file, hk.Unknown, hk.Known)
	}
	for _, want := range []string{"HAS CHANGED", file + ":2", h.KnownHostsLine()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message lacks %q: %v", want, err)
		}
	}
}

func TestOnlyKeysNeverPasswords(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a key the host does not know", func(t *testing.T) {
		block, err := ssh.MarshalPrivateKey(priv, "")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "stranger")
		os.WriteFile(p, pem.EncodeToMemory(block), 0o600)
		cfg := h.Config()
		cfg.Identity = p
		_, err = sshx.Dial(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "refused every key offered") {
			t.Fatalf("want the key refused, with what to do; got %v", err)
		}
		// The server saw public keys only: no password, no keyboard.
		if log := h.Log(); strings.Contains(log, "Failed password") || strings.Contains(log, "Failed keyboard-interactive") {
			t.Errorf("a password was tried:\n%s", log)
		}
	})
	t.Run("an encrypted key", func(t *testing.T) {
		block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "encrypted")
		os.WriteFile(p, pem.EncodeToMemory(block), 0o600)
		cfg := h.Config()
		cfg.Identity = p
		_, err = sshx.Dial(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "encrypted") || !strings.Contains(err.Error(), "ssh-add") {
			t.Fatalf("want the encrypted key refused, pointing at the agent; got %v", err)
		}
	})
}

func TestOneConnectionServesEveryCommand(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	var first []byte
	for i := 0; i < 3; i++ {
		// SSH_CONNECTION names the client's port: one connection, one port.
		out, err := c.Run(context.Background(), "sh", "-c", `echo "$SSH_CONNECTION"`)
		if err != nil {
			t.Fatal(err)
		}
		if len(strings.Fields(string(out))) != 4 {
			t.Fatalf("SSH_CONNECTION is %q", out)
		}
		if i == 0 {
			first = out
		} else if !bytes.Equal(out, first) {
			t.Errorf("command %d came over another connection: %q, then %q", i, first, out)
		}
	}
}

func TestArgumentsReachTheCommandAsThemselves(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	args := []string{"plain", "two words", "it's", `$HOME`, "`id`", "a;b", "*", ""}
	out, err := c.Run(context.Background(), append([]string{"printf", `[%s]\n`}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, a := range args {
		fmt.Fprintf(&want, "[%s]\n", a)
	}
	if string(out) != want.String() {
		t.Errorf("got\n%s\nwant\n%s", out, want.String())
	}
}

// running reports whether a process whose argv holds marker is running here
// (the fake host is this machine).
func running(marker string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			for _, a := range bytes.Split(b, []byte{0}) {
				if string(a) == marker {
					return true
				}
			}
		}
	}
	return false
}

// sleepMarker is a sleep argument no other process has: 1000.<random>.
func sleepMarker() string {
	var rnd [3]byte
	rand.Read(rnd[:])
	return "1000." + strconv.Itoa(int(rnd[0])<<16|int(rnd[1])<<8|int(rnd[2]))
}

func TestCommandDeadlineKillsTheRemoteCommand(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	marker := sleepMarker()
	_, err := c.Exec(context.Background(), sshx.Command{Argv: []string{"sleep", marker}, Timeout: 300 * time.Millisecond})
	var ce *sshx.CommandError
	if !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a *CommandError past its deadline, got %T: %v", err, err)
	}
	// The command is killed on the host, not left running.
	testenv.Eventually(t, "sleep "+marker+" killed on the host after its deadline (sshd said:\n"+h.Log()+")", 50*time.Millisecond, func() bool { return !running(marker) })
	// The connection is still good for the next command.
	if out, err := c.Run(context.Background(), "echo", "after"); err != nil || string(out) != "after\n" {
		t.Fatalf("after a deadline: %q, %v", out, err)
	}
}

func TestOutputKeptAndFailuresSayWhy(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	cfg := h.Config()
	cfg.LogDir = filepath.Join(t.TempDir(), "logs")
	c := dial(t, cfg)
	out, err := c.Exec(context.Background(), sshx.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Name: "fails"})
	var ce *sshx.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *CommandError, got %T: %v", err, err)
	}
	if ce.ExitCode != 3 || ce.Stderr != "err" || string(out) != "out\n" || ce.Host != cfg.String() {
		t.Errorf("exit %d, stderr %q, stdout %q, host %q", ce.ExitCode, ce.Stderr, out, ce.Host)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "err") {
		t.Errorf("the message does not say how it ended and what it said: %v", err)
	}
	if _, err := c.Run(context.Background(), "echo", "fine"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"001-fails.out": "out\n", "001-fails.err": "err\n", "002-echo-fine.out": "fine\n", "002-echo-fine.err": ""}
	ents, err := os.ReadDir(cfg.LogDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want) {
		t.Errorf("logs: %v, want %d files", ents, len(want))
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(cfg.LogDir, name))
		if err != nil || string(b) != content {
			t.Errorf("%s: %q, %v; want %q", name, b, err, content)
		}
	}
	if fi, err := os.Stat(cfg.LogDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the log directory: %v, %v; want mode 0700", fi, err)
	}
}

// echoServer serves path: each connection's bytes come back upper-cased
// once the client has finished writing.
func echoServer(t *testing.T, path string) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b, _ := io.ReadAll(conn)
				conn.Write(bytes.ToUpper(b))
			}()
		}
	}()
}

func TestForwardUnix(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	cfg := h.Config()
	cfg.Log = t.Logf
	c := dial(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("sshd said:\n%s", h.Log())
		}
	}()
	open := t.TempDir()
	remote := filepath.Join(open, "engine.sock")
	echoServer(t, remote)

	dir := filepath.Join(t.TempDir(), "sock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "forward.sock")
	if f, err := c.ForwardUnix(context.Background(), local, remote); err == nil {
		f.Close()
		t.Fatal("a forward into a directory open to others was made")
	}
	os.Chmod(dir, 0o700)
	f, err := c.ForwardUnix(context.Background(), local, remote)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(local); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("the local socket: %v, %v; want a socket of mode 0600", fi, err)
	}
	roundTrips(t, local)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(local); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the local socket is still there after Close: %v", err)
	}

	if _, err := c.DialUnix(context.Background(), filepath.Join(open, "absent.sock")); err == nil {
		t.Error("dialing a socket that is not there succeeded")
	}
}

// roundTrips sends three messages through the socket at local, each on a
// connection of its own, and checks each comes back upper-cased.
func roundTrips(t *testing.T, local string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		conn, err := net.Dial("unix", local)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("ping %d through ssh", i)
		conn.Write([]byte(msg))
		conn.(*net.UnixConn).CloseWrite()
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || string(got) != strings.ToUpper(msg) {
			t.Fatalf("round trip %d: %q, %v", i, got, err)
		}
	}
}

// TestForwardCommand carries each connection to a command's stdin
// and stdout, as `standin dial` and `docker system dial-stdio` serve them:
// here tr, which upper-cases what it reads.
func TestForwardCommand(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	cfg := h.Config()
	cfg.Log = t.Logf
	c := dial(t, cfg)
	upper := []string{"tr", "a-z", "A-Z"}

	conn, err := c.DialCommand(context.Background(), upper...)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("hello"))
	conn.(interface{ CloseWrite() error }).CloseWrite()
	got, err := io.ReadAll(conn)
	conn.Close()
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("through tr: %q, %v", got, err)
	}
	if err := conn.SetDeadline(time.Now()); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SetDeadline: %v, want it unsupported", err)
	}

	// Close ends the command on the host, even one that reads no stdin.
	marker := sleepMarker()
	conn, err = c.DialCommand(context.Background(), "sleep", marker)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	testenv.Eventually(t, "sleep "+marker+" gone from the host after its connection closed", 50*time.Millisecond, func() bool { return !running(marker) })

	dir := filepath.Join(t.TempDir(), "sock")
	os.Mkdir(dir, 0o700)
	local := filepath.Join(dir, "engine.sock")
	f, err := c.Forward(context.Background(), local, "tr", func(ctx context.Context) (net.Conn, error) { return c.DialCommand(ctx, upper...) })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	roundTrips(t, local)
}

func sha(b []byte) manifests.Digest { return manifests.DigestOf(b) }

func TestCopyFileChecksEveryByte(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	dir := t.TempDir()
	content := make([]byte, 3<<20+17)
	rand.Read(content)
	want := sha(content)

	dst := filepath.Join(dir, "standin")
	if err := c.CopyFile(context.Background(), dst, 0o750, bytes.NewReader(content), int64(len(content)), want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the copy differs from the source (%d bytes, %v)", len(got), err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o750 {
		t.Errorf("mode %s, want 0750", fi.Mode())
	}

	tampered := bytes.Clone(content)
	tampered[len(tampered)/2] ^= 1
	for name, src := range map[string][]byte{
		"one byte changed": tampered,
		"cut short":        content[:len(content)-1],
		"one byte longer":  append(bytes.Clone(content), 0),
	} {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(dir, "refused-"+strings.ReplaceAll(name, " ", "-"))
			err := c.CopyFile(context.Background(), dst, 0o750, bytes.NewReader(src), int64(len(content)), want)
			var me *manifests.MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("want the copy refused with a *manifests.MismatchError, got %T: %v", err, err)
			}
			if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after a refused copy: %v", dst, err)
			}
		})
	}
	// Nothing but the good copy is left: no temporary files.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "standin" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only standin", names)
	}
}

func TestKeepAlivesCloseADeadConnection(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	cfg := h.Config()
	cfg.KeepAliveInterval = 100 * time.Millisecond
	cfg.KeepAliveMax = 2
	c := dial(t, cfg)
	if _, err := c.Run(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}
	// The host stops answering without closing anything: its sshd
	// processes are frozen, as a host whose network went away.
	sessions := h.Sessions()
	if len(sessions) == 0 {
		t.Fatal("no sshd session process found")
	}
	for _, p := range sessions {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	defer func() {
		for _, p := range sessions {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}()
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("the connection to a host that stopped answering was not closed")
	}
	if !errors.Is(c.Err(), sshx.ErrNoKeepAlive) {
		t.Errorf("closed for %v, want %v", c.Err(), sshx.ErrNoKeepAlive)
	}
	if _, err := c.Run(context.Background(), "true"); !errors.Is(err, sshx.ErrNoKeepAlive) {
		t.Errorf("a command on the dead connection: %v, want it refused for %v", err, sshx.ErrNoKeepAlive)
	}
}

func TestHostCutOffEndsItsCommands(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	c := dial(t, h.Config())
	marker := sleepMarker()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), sshx.Command{Argv: []string{"sleep", marker}, Timeout: 10 * time.Minute})
		errc <- err
	}()
	// Wait until the command runs on the host, then cut the host off.
	testenv.Eventually(t, "sleep "+marker+" running on the host", 25*time.Millisecond, func() bool { return running(marker) })
	h.Stop()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "lost") {
			t.Errorf("the command on a host cut off: %v, want the connection lost", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the command on a host cut off never ended")
	}
	<-c.Done()
	// Back again, a new connection works.
	h.Restart()
	c2 := dial(t, h.Config())
	if out, err := c2.Run(context.Background(), "echo", "back"); err != nil || string(out) != "back\n" {
		t.Fatalf("after the host came back: %q, %v", out, err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  sshx.Config
		want []string
	}{
		{sshx.Config{}, []string{"user: missing", "host: missing", "port: 0"}},
		{sshx.Config{User: "u", Host: "h", Port: 70000}, []string{"port: 70000"}},
		{sshx.Config{User: "u", Host: "h", Port: 22, DialTimeout: -1, KeepAliveMax: -1}, []string{"dialTimeout", "keepAliveMax"}},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("%+v: valid", tc.cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v lacks %q", tc.cfg, err, w)
			}
		}
	}
	cfg := sshx.Config{User: "root", Host: "::1"}
	cfg.FillDefaults()
	if err := cfg.Validate(); err != nil || cfg.String() != "ssh://root@[::1]:22" {
		t.Errorf("%v, %s", err, cfg.String())
	}
}

// TestFakeHostSetsEveryVariable: a fake host's sessions get each variable
// sshtest.SetEnv names (sshd keeps only the first SetEnv line, so they
// must share one), and a host that authorizes another's key admits it.
func TestFakeHostSetsEveryVariable(t *testing.T) {
	h1 := sshtest.Start(t, "127.0.0.2")
	h2 := sshtest.Start(t, "127.0.0.3", sshtest.SetEnv("SB_A", "one"), sshtest.SetEnv("SB_B", "two words"), sshtest.Authorize(h1))
	cfg := h2.Config()
	cfg.Identity = h1.ClientKey
	c := dial(t, cfg)
	out, err := c.Run(context.Background(), "sh", "-c", `printf '%s|%s' "$SB_A" "$SB_B"`)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "one|two words" {
		t.Errorf("the host's sessions have SB_A|SB_B = %q, want %q", out, "one|two words")
	}
}
