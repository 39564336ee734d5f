//go:build linux

package standin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/standin/inventory"
	"github.com/sealbench/sealbench/standin/sandbox"
)

func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		sandbox.InitMain()
	}
	if sock := os.Getenv(serveEnv); sock != "" {
		os.Exit(serveMain(sock))
	}
	os.Exit(m.Run())
}

// serveEnv, set to a socket's path, makes the test binary the stand-in,
// serving there (its state beside the socket) until SIGTERM: what
// serveProcess starts.
const serveEnv = "STANDIN_TEST_SERVE"

func serveMain(sock string) int {
	if os.Getenv("GOMAXPROCS") == "" { // as standin serve does
		runtime.GOMAXPROCS(DaemonProcs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Serve(ctx, ServeOptions{Socket: sock, Options: Options{StateDir: filepath.Join(filepath.Dir(sock), "state")},
		Ready: func(string) { fmt.Println("ready") }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// serveProcess runs the stand-in in a process of its own, as a run has it
// (benchmarks time a client's round trips through it), and stops it when
// tb ends.
func serveProcess(tb testing.TB) *testServer {
	tb.Helper()
	base := testenv.ShortTempDir(tb, "standin")
	sock := filepath.Join(base, "standin.sock")
	cmd, out := testenv.StartSelf(tb, serveEnv+"="+sock)
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			tb.Errorf("the stand-in's process: %v", err)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		tb.Fatalf("starting the stand-in: %q, %v", line, err)
	}
	go io.Copy(io.Discard, out)
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	return &testServer{socket: sock, state: filepath.Join(base, "state"), cli: cli}
}

// entry is one file of a test layer.
type entry struct {
	name     string
	typ      byte
	body     string
	link     string
	mode     int64
	uid, gid int
}

// layerTar writes entries as an uncompressed layer tar.
func layerTar(t testing.TB, entries []entry) []byte {
	t.Helper()
	b, err := layerTarErr(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func layerTarErr(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// busyboxEntries is a tiny root filesystem: busybox-static and its applets.
func busyboxEntries(t testing.TB) []entry {
	t.Helper()
	bb := testenv.NeedCommand(t, "busybox")
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	es := []entry{
		{name: "./", typ: tar.TypeDir},
		{name: "bin/", typ: tar.TypeDir},
		{name: "bin/busybox", body: string(b), mode: 0o755},
		{name: "etc/", typ: tar.TypeDir},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"},
		{name: "etc/group", body: "root:x:0:\nnogroup:x:65534:\n"},
		{name: "root/", typ: tar.TypeDir, mode: 0o700},
		{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: "proc/", typ: tar.TypeDir},
		{name: "dev/", typ: tar.TypeDir},
		{name: "sys/", typ: tar.TypeDir},
		{name: "work/", typ: tar.TypeDir},
	}
	for _, a := range []string{"sh", "cat", "echo", "id", "ls", "mount", "unshare", "ps", "sleep", "true", "false",
		"hostname", "touch", "wget", "nc", "ping", "mkdir", "rm", "test", "env", "pwd", "grep", "head", "wc", "sync", "tr"} {
		es = append(es, entry{name: "bin/" + a, typ: tar.TypeSymlink, link: "busybox"})
	}
	return es
}

// buildImage builds an image from layers (bottom first) with a default command.
func buildImage(t testing.TB, layers ...[]byte) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		b := l
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Cmd = []string{"sh"}
	cf.Config.Env = []string{"PATH=/bin", "IMAGE_ENV=yes"}
	cf.Config.Labels = map[string]string{"from.image": "1"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// dockerSaveTar writes img in the tar format `docker save` writes.
func dockerSaveTar(t testing.TB, tag string, img v1.Image) []byte {
	t.Helper()
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarball.Write(ref, img, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ociLayoutTar writes img as a tar of an OCI image layout.
func ociLayoutTar(t testing.TB, tag string, img v1.Image) []byte {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"io.containerd.image.name": tag, "org.opencontainers.image.ref.name": "latest"})); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var files []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		rel, _ := filepath.Rel(dir, f)
		tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	tw.Close()
	return buf.Bytes()
}

// rawSaveTar writes a docker-save tar by hand: one uncompressed layer with
// the diff ID given (the real one when diffID is ""), so tests can lie.
func rawSaveTar(t testing.TB, tag string, layer []byte, diffID string) []byte {
	t.Helper()
	if diffID == "" {
		sum := sha256.Sum256(layer)
		diffID = "sha256:" + hex.EncodeToString(sum[:])
	}
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Cmd": []string{"sh"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	cs := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cs[:]) + ".json"
	man, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{tag}, "Layers": []string{"layer0/layer.tar"}}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		n string
		b []byte
	}{{cfgName, cfg}, {"layer0/layer.tar", layer}, {"manifest.json", man}} {
		tw.WriteHeader(&tar.Header{Name: f.n, Mode: 0o644, Size: int64(len(f.b)), Typeflag: tar.TypeReg})
		tw.Write(f.b)
	}
	tw.Close()
	return buf.Bytes()
}

// testServer is a Server behind an httptest server on a unix socket, and
// an official client for it.
type testServer struct {
	srv    *Server
	ts     *httptest.Server
	socket string
	state  string
	cli    *client.Client
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	base := t.TempDir()
	state := filepath.Join(base, "state")
	srv, err := New(Options{StateDir: state, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(filepath.Join(base, "run", "standin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+l.Path), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{srv: srv, ts: ts, socket: l.Path, state: state, cli: cli}
	t.Cleanup(func() {
		cli.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("closing the server: %v", err)
		}
		ts.Close()
		inv, err := inventory.Read(state)
		if err != nil {
			t.Errorf("inventory after close: %v", err)
			return
		}
		if problems := inv.Leftovers(); len(problems) > 0 {
			t.Errorf("left behind after close: %v", problems)
		}
	})
	return s
}

// serveTest runs Serve, the whole stand-in as `standin serve` runs it, on
// a socket in a fresh directory, and returns once it is ready: a client
// for it, what stops it (also when the test ends), and the channel
// Serve's result comes on.
func serveTest(t *testing.T) (ts *testServer, stop context.CancelFunc, done <-chan error) {
	t.Helper()
	base := t.TempDir()
	ts = &testServer{socket: filepath.Join(base, "run", "standin.sock"), state: filepath.Join(base, "state")}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan string, 1)
	result := make(chan error, 1)
	go func() {
		result <- Serve(ctx, ServeOptions{Socket: ts.socket, Options: Options{StateDir: ts.state, Logf: t.Logf}, Ready: func(s string) { ready <- s }})
	}()
	select {
	case <-ready:
	case err := <-result:
		t.Fatalf("Serve: %v", err)
	}
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+ts.socket), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ts.cli = cli
	return ts, cancel, result
}

// raw does a plain HTTP request over the socket.
func (s *testServer) raw(t testing.TB, method, path string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	req, err := http.NewRequest(method, "http://standin"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (s *testServer) load(t testing.TB, tarBytes []byte) {
	t.Helper()
	testenv.NeedRoot(t) // unpacking chowns files and makes whiteout device nodes
	resp, err := s.cli.ImageLoad(context.Background(), bytes.NewReader(tarBytes))
	if err != nil {
		t.Fatalf("loading image: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// docker25SaveTar writes img as `docker save` has since Docker 25: blobs
// under blobs/sha256/ named by their digests, with a manifest.json.
func docker25SaveTar(t testing.TB, tag string, img v1.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(n string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfgName, _ := img.ConfigName()
	add("blobs/sha256/"+cfgName.Hex, cfg)
	layers, _ := img.Layers()
	var names []string
	for _, l := range layers {
		d, _ := l.Digest()
		rc, _ := l.Compressed()
		b, _ := io.ReadAll(rc)
		rc.Close()
		add("blobs/sha256/"+d.Hex, b)
		names = append(names, "blobs/sha256/"+d.Hex)
	}
	man, _ := json.Marshal([]map[string]any{{"Config": "blobs/sha256/" + cfgName.Hex, "RepoTags": []string{tag}, "Layers": names}})
	add("manifest.json", man)
	tw.Close()
	return buf.Bytes()
}
