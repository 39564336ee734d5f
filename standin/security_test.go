//go:build linux

package standin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/sealbench/sealbench/internal/testenv"
)

// inetSockets lists the internet sockets process pid holds that take
// traffic from the network: TCP sockets in LISTEN and bound UDP and raw
// sockets, as "tcp 0100007F:A1B2" (the address in /proc/net's hex). It
// matches the socket inodes of /proc/PID/fd against /proc/PID/net/*,
// which shows the network namespace the process is in.
func inetSockets(t *testing.T, pid int) []string {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatalf("listing the descriptors of pid %d: %v", pid, err)
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed since
		}
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var out []string
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6", "raw", "raw6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, proto))
		if err != nil {
			if os.IsNotExist(err) { // no IPv6 in this kernel
				continue
			}
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			const listen = "0A"
			if strings.HasPrefix(proto, "tcp") && fs[3] != listen {
				continue // a connection we made, not a way in
			}
			out = append(out, proto+" "+fs[1])
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestStandinOpensNoInternetSocket: the stand-in serving (a Sandbox
// running, an exec done, an image loaded) holds no listening TCP socket
// and no UDP or raw socket: the unix socket is the only way in. The
// stand-in here is Serve in this test process, as `standin serve` runs it.
func TestStandinOpensNoInternetSocket(t *testing.T) {
	testenv.NeedRoot(t)
	// The check can fail: it sees a listener of ours.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	found := false
	for _, s := range inetSockets(t, os.Getpid()) {
		if strings.HasSuffix(s, fmt.Sprintf(":%04X", port)) {
			found = true
		}
	}
	l.Close()
	if !found {
		t.Fatalf("the check does not see a TCP listener on port %d: %v", port, inetSockets(t, os.Getpid()))
	}
	if before := inetSockets(t, os.Getpid()); len(before) > 0 {
		t.Fatalf("this test process holds internet sockets before the stand-in starts: %v", before)
	}

	ts, stop, done := serveTest(t)
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	cli := ts.cli
	withBusybox(t, ts, false)
	id := ts.run(t, &container.Config{Cmd: []string{"sleep", "1000"}}, nil)
	defer cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	if r := ts.exec(t, id, container.ExecOptions{Cmd: []string{"true"}}, ""); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if got := inetSockets(t, os.Getpid()); len(got) > 0 {
		t.Errorf("the stand-in holds internet sockets: %v; the unix socket must be the only way in", got)
	}
	// Nor does anything in the Sandbox listen where the host could reach it:
	// its init is in a network namespace of its own.
	info, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	sbNet, err := os.Readlink("/proc/" + strconv.Itoa(info.State.Pid) + "/ns/net")
	if err != nil || sbNet == hostNet {
		t.Errorf("the Sandbox's main process (pid %d) is in network namespace %q (%v), the host's is %q", info.State.Pid, sbNet, err, hostNet)
	}
}

// TestSocketDirectoryIsPrivate: what Listen makes is 0700 and 0600, and
// a directory someone else could enter or own is refused: a world-
// writable one (where another user could swap the socket) and one owned
// by another user.
func TestSocketDirectoryIsPrivate(t *testing.T) {
	testenv.NeedRoot(t) // to hand a directory to another user
	for name, prep := range map[string]func(dir string) error{
		"world-writable, sticky": func(dir string) error { return os.Chmod(dir, 0o1777) },
		"group-readable":         func(dir string) error { return os.Chmod(dir, 0o750) },
		"owned by nobody":        func(dir string) error { return os.Chown(dir, 65534, 65534) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := prep(dir); err != nil {
				t.Fatal(err)
			}
			if l, err := Listen(filepath.Join(dir, "s.sock")); err == nil {
				l.Close()
				t.Fatalf("Listen in a %s directory succeeded", name)
			} else if !errors.Is(err, ErrUnsafeSocketDir) {
				t.Errorf("Listen in a %s directory: %v, want ErrUnsafeSocketDir", name, err)
			}
		})
	}
}

// FuzzImageLoad feeds image tars to POST /images/load through the real
// handler: the docker-save and OCI layout readers, the manifest and config
// decoding, the digest and diff id checks, and the layer unpacker. Seeds
// are valid tars in each format; mutations of their file contents keep the
// tar readable, so the JSON and the layers inside are what gets explored.
// It must never panic; a refused load must leave nothing behind (no new
// layer or image, nothing in tmp/); a file beside the state directory is
// never touched.
func FuzzImageLoad(f *testing.F) {
	testenv.NeedRoot(f) // unpacking chowns files and makes whiteout device nodes
	base := f.TempDir()
	state := filepath.Join(base, "state")
	canary := filepath.Join(base, "canary")
	if err := os.WriteFile(canary, []byte("keep"), 0o644); err != nil {
		f.Fatal(err)
	}
	srv, err := New(Options{StateDir: state, Logf: func(string, ...any) {}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	small := layerTar(f, []entry{{name: "bin/", typ: tar.TypeDir}, {name: "bin/sh", body: "#!", mode: 0o755},
		{name: "l", typ: tar.TypeSymlink, link: "bin/sh"}, {name: "h", typ: tar.TypeLink, link: "bin/sh"}})
	img := buildImage(f, small)
	f.Add(rawSaveTar(f, "fuzz:raw", small, ""))
	f.Add(dockerSaveTar(f, "fuzz:save", img))
	f.Add(docker25SaveTar(f, "fuzz:save25", img))
	f.Add(ociLayoutTar(f, "fuzz:oci", img))
	count := func(dir string) int {
		ents, _ := os.ReadDir(filepath.Join(state, dir))
		return len(ents)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		layers, images := count("layers"), count("images")
		req := httptest.NewRequest(http.MethodPost, "http://standin/images/load", bytes.NewReader(b))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			if l, i := count("layers"), count("images"); l != layers || i != images {
				t.Errorf("a refused load (%d: %s) left layers %d -> %d, images %d -> %d", rec.Code, rec.Body, layers, l, images, i)
			}
		}
		if n := count("tmp"); n != 0 {
			t.Errorf("a load (%d) left %d entries in tmp/", rec.Code, n)
		}
		if c, err := os.ReadFile(canary); err != nil || string(c) != "keep" {
			t.Fatalf("a load changed a file outside the state directory: %q, %v", c, err)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 2 {
			t.Fatalf("a load wrote beside the state directory: %v", ents)
		}
	})
}
