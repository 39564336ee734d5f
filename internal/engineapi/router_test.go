package engineapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeEngine is a Backend that records each call as its name and
// arguments, and answers it with that record.
type fakeEngine struct {
	mu    sync.Mutex
	calls []string
}

var _ Backend = (*fakeEngine)(nil)

func (f *fakeEngine) record(format string, args ...any) string {
	c := fmt.Sprintf(format, args...)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	return c
}

func (f *fakeEngine) stream(w http.ResponseWriter, c string) {
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, c)
}

func (f *fakeEngine) SystemVersion(context.Context) (any, error) {
	return f.record("SystemVersion"), nil
}
func (f *fakeEngine) SystemInfo(context.Context) (any, error) { return f.record("SystemInfo"), nil }
func (f *fakeEngine) ImageLoad(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	f.stream(w, f.record("ImageLoad %d %v", n, err))
}
func (f *fakeEngine) ImageInspect(_ context.Context, name string) (any, error) {
	if name == "missing" {
		return nil, fmt.Errorf("%w: No such image: %s", ErrNotFound, name)
	}
	return f.record("ImageInspect %s", name), nil
}
func (f *fakeEngine) ImageDelete(_ context.Context, name string, force bool) (any, error) {
	return f.record("ImageDelete %s %v", name, force), nil
}
func (f *fakeEngine) ContainerCreate(_ context.Context, name string, body io.Reader) (any, error) {
	var req struct{ Image string }
	if err := DecodeJSON(body, &req); err != nil {
		return nil, fmt.Errorf("decoding the container config: %w", err)
	}
	return f.record("ContainerCreate %s %s", name, req.Image), nil
}
func (f *fakeEngine) ContainerInspect(_ context.Context, id string) (any, error) {
	return f.record("ContainerInspect %s", id), nil
}
func (f *fakeEngine) ContainerStart(_ context.Context, id string) (bool, error) {
	f.record("ContainerStart %s", id)
	return id != "running", nil
}
func (f *fakeEngine) ContainerWait(w http.ResponseWriter, r *http.Request, id string) {
	f.stream(w, f.record("ContainerWait %s %s", id, r.URL.Query().Get("condition")))
}
func (f *fakeEngine) ContainerLogs(w http.ResponseWriter, r *http.Request, id string) {
	f.stream(w, f.record("ContainerLogs %s", id))
}
func (f *fakeEngine) ContainerDelete(_ context.Context, id string, force bool) error {
	f.record("ContainerDelete %s %v", id, force)
	if id == "running" && !force {
		return fmt.Errorf("%w: cannot remove container %q: container is running", ErrConflict, id)
	}
	return nil
}
func (f *fakeEngine) ContainerExec(_ context.Context, id string, body io.Reader) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	return f.record("ContainerExec %s %s", id, b), nil
}
func (f *fakeEngine) ExecStart(w http.ResponseWriter, r *http.Request, id string) {
	f.stream(w, f.record("ExecStart %s", id))
}
func (f *fakeEngine) ExecInspect(_ context.Context, id string) (any, error) {
	return f.record("ExecInspect %s", id), nil
}

// fullEngine is a fakeEngine with every optional call.
type fullEngine struct{ fakeEngine }

var (
	_ ImageLister       = (*fullEngine)(nil)
	_ ImagePuller       = (*fullEngine)(nil)
	_ ContainerLister   = (*fullEngine)(nil)
	_ ContainerStopper  = (*fullEngine)(nil)
	_ ContainerAttacher = (*fullEngine)(nil)
)

func (f *fullEngine) ImageList(_ context.Context, filters string) (any, error) {
	return f.record("ImageList %s", filters), nil
}
func (f *fullEngine) ImageCreate(w http.ResponseWriter, r *http.Request) {
	f.stream(w, f.record("ImageCreate %s", r.URL.Query().Get("fromImage")))
}
func (f *fullEngine) ContainerList(_ context.Context, all bool, filters string) (any, error) {
	return f.record("ContainerList %v %s", all, filters), nil
}
func (f *fullEngine) ContainerStop(_ context.Context, id string, opts StopOptions) (bool, error) {
	t := "default"
	if opts.Timeout != nil {
		t = opts.Timeout.String()
	}
	f.record("ContainerStop %s %q %s", id, opts.Signal, t)
	return id != "exited", nil
}
func (f *fullEngine) ContainerKill(_ context.Context, id, signal string) error {
	f.record("ContainerKill %s %q", id, signal)
	return nil
}
func (f *fullEngine) ContainerAttach(w http.ResponseWriter, r *http.Request, id string) {
	f.stream(w, f.record("ContainerAttach %s", id))
}

var testIdentity = Identity{Name: "the test engine", Server: "test-engine/1 (linux)", OS: "linux"}

// do sends one request through a Router for b, and returns the answer and
// the call b saw ("" for none).
func do(t *testing.T, b Backend, calls func() []string, method, path, body string) (*httptest.ResponseRecorder, string) {
	t.Helper()
	before := len(calls())
	w := httptest.NewRecorder()
	NewRouter(b, testIdentity).ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	after := calls()
	switch len(after) - before {
	case 0:
		return w, ""
	case 1:
		return w, after[before]
	}
	t.Fatalf("%s %s made calls %q", method, path, after[before:])
	return nil, ""
}

func TestRouterRoutesEveryCall(t *testing.T) {
	f := &fullEngine{}
	calls := func() []string { return f.calls }
	for _, c := range []struct {
		method, path, body string
		code               int
		call               string
	}{
		{"GET", "/version", "", 200, "SystemVersion"},
		{"GET", "/v1.51/info", "", 200, "SystemInfo"},
		{"POST", "/images/load", "tar", 200, "ImageLoad 3 <nil>"},
		{"GET", "/images/json?filters=%7B%7D", "", 200, "ImageList {}"},
		{"GET", "/v1.43/images/docker.io/library/busybox:1/json", "", 200, "ImageInspect docker.io/library/busybox:1"},
		{"GET", "/images/json/json", "", 200, "ImageInspect json"},
		{"DELETE", "/images/sha256:abc?force=1", "", 200, "ImageDelete sha256:abc true"},
		{"POST", "/images/create?fromImage=busybox", "", 200, "ImageCreate busybox"},
		{"POST", "/containers/create?name=a", `{"Image":"busybox"}`, 201, "ContainerCreate a busybox"},
		{"GET", "/containers/json?all=true&filters=%7B%7D", "", 200, "ContainerList true {}"},
		{"GET", "/containers/abc/json", "", 200, "ContainerInspect abc"},
		{"POST", "/containers/abc/start", "", 204, "ContainerStart abc"},
		{"POST", "/containers/running/start", "", 304, "ContainerStart running"},
		{"POST", "/containers/abc/stop?t=3&signal=HUP", "", 204, `ContainerStop abc "HUP" 3s`},
		{"POST", "/containers/exited/stop", "", 304, `ContainerStop exited "" default`},
		{"POST", "/containers/abc/kill?signal=TERM", "", 204, `ContainerKill abc "TERM"`},
		{"POST", "/containers/abc/wait?condition=removed", "", 200, "ContainerWait abc removed"},
		{"POST", "/containers/abc/attach", "", 200, "ContainerAttach abc"},
		{"GET", "/containers/abc/logs", "", 200, "ContainerLogs abc"},
		{"DELETE", "/containers/abc", "", 204, "ContainerDelete abc false"},
		{"DELETE", "/containers/running", "", 409, "ContainerDelete running false"},
		{"POST", "/containers/abc/exec", `{"Cmd":["true"]}`, 201, `ContainerExec abc {"Cmd":["true"]}`},
		{"POST", "/exec/e1/start", "", 200, "ExecStart e1"},
		{"GET", "/exec/e1/json", "", 200, "ExecInspect e1"},
	} {
		w, call := do(t, f, calls, c.method, c.path, c.body)
		if w.Code != c.code || call != c.call {
			t.Errorf("%s %s: %d, call %q; want %d, %q (%s)", c.method, c.path, w.Code, call, c.code, c.call, w.Body)
		}
		if w.Header().Get("Api-Version") != APIVersion || w.Header().Get("Server") != testIdentity.Server || w.Header().Get("Ostype") != "linux" {
			t.Errorf("%s %s: headers %v", c.method, c.path, w.Header())
		}
	}
}

// TestRouterAnswersWhatNoCallServes: the answers that are the Router's
// own, each in the Engine API's error shape but a ping's.
func TestRouterAnswersWhatNoCallServes(t *testing.T) {
	f := &fakeEngine{} // no optional call
	calls := func() []string { return f.calls }
	for _, c := range []struct {
		method, path string
		code         int
		message      string
	}{
		{"GET", "/images/json", 501, "the test engine does not implement GET /images/json"},
		{"POST", "/images/create", 501, "does not implement POST /images/create"},
		{"GET", "/containers/json", 501, "does not implement GET /containers/json"},
		{"POST", "/v1.51/containers/abc/stop", 501, "does not implement POST /containers/abc/stop"},
		{"POST", "/containers/abc/kill", 501, "does not implement"},
		{"POST", "/containers/abc/attach", 501, "does not implement"},
		{"POST", "/containers/abc/pause", 501, "does not implement POST /containers/abc/pause"},
		{"POST", "/containers/json", 501, "does not implement POST /containers/json"}, // a route of another method: not 405
		{"HEAD", "/version", 501, ""},
		{"GET", "/images/", 501, "does not implement"},
		{"GET", "/images/missing/json", 404, "No such image: missing"},
		{"GET", "/nothing/here", 404, "page not found: GET /nothing/here"},
		{"GET", "/v1.9/version", 400, "client version 1.9 is too old"},
		{"GET", "/v1.99/version", 400, "client version 1.99 is too new"},
	} {
		w, call := do(t, f, calls, c.method, c.path, "")
		if c.path == "/images/missing/json" {
			call = "" // answered by the Backend, with its error
		}
		var e struct{ Message *string }
		if w.Code != c.code || call != "" || (c.method != "HEAD" && (json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Message == nil || !strings.Contains(*e.Message, c.message))) {
			t.Errorf("%s %s: %d %q, call %q; want %d with a message saying %q", c.method, c.path, w.Code, w.Body, call, c.code, c.message)
		}
	}
	for _, method := range []string{"GET", "HEAD"} {
		w, _ := do(t, f, calls, method, "/v1.24/_ping", "")
		want := map[string]string{"GET": "OK", "HEAD": ""}[method]
		if w.Code != 200 || w.Body.String() != want || w.Header().Get("Api-Version") != APIVersion {
			t.Errorf("%s /_ping: %d %q %v", method, w.Code, w.Body, w.Header())
		}
	}
}

// bigCreate is a container create request of n bytes that is made as it
// is read, never held: a label's value of 'a's. Its length is hidden, so
// a client sends it chunked.
func bigCreate(n int64) io.Reader {
	const head, tail = `{"Image":"busybox","Labels":{"a":"`, `"}}`
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeat('a'), n-int64(len(head)+len(tail))), strings.NewReader(tail))
}

// repeat reads as an endless run of its byte.
type repeat byte

func (b repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestJSONBodiesAreBounded sends a 300 MB container create, once with its
// length declared and once chunked: each is refused with 413 in the error
// shape, and neither is read into memory (what the process allocates
// meanwhile stays far below the body's size). A normal create is served
// after them, and an image load larger than the bound streams through.
func TestJSONBodiesAreBounded(t *testing.T) {
	f := &fakeEngine{}
	srv := httptest.NewServer(NewRouter(f, testIdentity))
	defer srv.Close()
	const size = 300 << 20
	for _, declared := range []bool{true, false} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1.51/containers/create?name=big", bigCreate(size))
		if err != nil {
			t.Fatal(err)
		}
		if declared {
			req.ContentLength = size
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("declared length %v: %v", declared, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		var e struct{ Message string }
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Message, "request body too large") {
			t.Errorf("declared length %v: %d %s, want 413 in the error shape", declared, resp.StatusCode, b)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("declared length %v: %d MiB allocated while refusing a %d MiB body", declared, grew>>20, size>>20)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("the refused creates reached the Backend: %q", f.calls)
	}

	resp, err := srv.Client().Post(srv.URL+"/containers/create?name=small", "application/json", strings.NewReader(`{"Image":"busybox"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), "ContainerCreate small busybox") {
		t.Errorf("a normal create: %d %s", resp.StatusCode, b)
	}

	const load = MaxJSONBody + 1<<20
	resp, err = srv.Client().Post(srv.URL+"/images/load", "application/x-tar", bigCreate(load))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("ImageLoad %d <nil>", load); resp.StatusCode != http.StatusOK || string(b) != want {
		t.Errorf("a load of %d bytes: %d %q, want 200 %q", load, resp.StatusCode, b, want)
	}
}

func TestFail(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
		msg  string
	}{
		{fmt.Errorf("%w: No such container: x", ErrNotFound), 404, "No such container: x"},
		{fmt.Errorf("starting: %w", fmt.Errorf("%w: is running", ErrConflict)), 409, "starting: is running"},
		{fmt.Errorf("%w: exec with a TTY", ErrNotImplemented), 501, "exec with a TTY"},
		{fmt.Errorf("decoding: %w", DecodeJSON(strings.NewReader("{"), &struct{}{})), 400, "decoding: unexpected EOF"},
		{fmt.Errorf("decoding: %w", DecodeJSON(http.MaxBytesReader(nil, io.NopCloser(bigCreate(9<<20)), 8<<20), &struct{}{})), 413, "decoding: request body too large: more than 8 MiB of JSON"},
		{io.ErrUnexpectedEOF, 500, "unexpected EOF"},
	} {
		w := httptest.NewRecorder()
		Fail(w, c.err)
		var e struct{ Message string }
		if w.Code != c.code || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Message != c.msg {
			t.Errorf("Fail(%v): %d %s, want %d %q", c.err, w.Code, w.Body, c.code, c.msg)
		}
	}
}
